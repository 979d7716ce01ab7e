/* gen_topos: writes the bundled SimGrid platform files of sim/topos/ (docs/epsim.md, "Platform
 * files").
 *
 * Usage: gen_topos [--flat] OUTDIR   writes every bundled topology as OUTDIR/<name>.xml
 * The files in the repository are this program's output; tests/sim checks that regenerating them
 * gives identical bytes, so edit this program, not the XML. --flat writes the clusters in the flat
 * layout instead (the same network; tests/sim checks that epsim gives the same results on both).
 *
 * A GPU is a host named gpu<rank> with properties peak_flops (dense bf16 flop/s), hbm_bw
 * (bytes/s), hbm_bytes (GPU memory), sm_count, node, local_index, gpus_per_node; the root zone's
 * property calibration names the default calibration file. Inside a node, each GPU has one
 * full-duplex NVLink link to the node's NVSwitch (or, for two GPUs without a switch, one direct
 * link). Across nodes (rail-optimised): the NIC of GPU i connects to a leaf switch of rail i;
 * leaves of one rail meet at a rail spine through a non-blocking uplink. Rails are not joined:
 * cross-rail traffic goes over NVLink to the GPU on the destination's rail first (PXN), as NCCL and
 * DeepEP do; epsim decomposes it that way.
 *
 * Layouts. Flat (one node, or --flat): one zone with DijkstraCache routing over every GPU, router
 * and link. Zoned (clusters): a zone per node (Full routing: GPU-to-GPU routes are the sender's
 * NVLink out and the receiver's NVLink in) and a zone per rail (Floyd routing: the NIC hosts
 * gpu<g>.nic of the rail's GPUs, their links, the leaves and the spine), with no routes between
 * zones. epsim sends traffic between nodes from NIC host to NIC host, so every route SimGrid looks
 * up is one of a small zone's, where the flat layout's DijkstraCache searched every GPU's
 * predecessor table (an 18% share of a 1024-GPU run, docs/performance.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *what;
    int nodes, gpn;
    double peak_flops, hbm_bw;
    int sms;
    double nvlink_bw, nvlink_lat; /* per GPU, per direction */
    int direct_pair;              /* two GPUs linked directly (no NVSwitch) */
    double nic_bw, nic_lat;       /* per GPU NIC, per direction */
    int nodes_per_leaf;
    double spine_lat;
    const char *calib; /* default calibration (traces/calib/<name>.json), or NULL */
    double hbm_bytes;  /* GPU memory */
} topo;

/* GPU memory as the driver reports it: H100 80GB HBM3 81559 MiB (nvidia-smi on the lent
 * nvidia-h100-x1), H200 143771 MiB (docs/epsim.md, "Calibration"); GB200 186 GB (NVL72 datasheet:
 * 13.4 TB HBM3e over 72 GPUs). */
#define H100_MEM  (81559.0 * 1048576)
#define H200_MEM  (143771.0 * 1048576)
#define GB200_MEM 186e9

/* H100/H200 SXM: 989 TFLOP/s dense bf16, 132 SMs. NVLink 4: 18 links; H100 25 GB/s per link
 * (450 GB/s), the lent H200 pair 26.562 GB/s per link (478 GB/s, docs/epsim.md, "Calibration").
 * NDR InfiniBand 400 Gb/s = 50 GB/s per NIC. NVL72 (GB200): 2.25 PFLOP/s dense bf16 (B200
 * datasheet), 8 TB/s HBM3e, 148 SMs, NVLink 5 900 GB/s per direction.
 * Default calibrations (docs/calibration.md): the lent H200 machines and the 2 x H100 one their
 * own; the DGX H100 topologies the compute of one measured H100 with their own link figures; NVL72
 * none. */
static const topo TOPOS[] = {
    {"h200x2", "the lent machine: 2 x H200 joined by 18 NVLink 4 links", 1, 2, 989e12, 4.8e12, 132,
     478.116e9, 0.5e-6, 1, 0, 0, 0, 0, "h200x2", H200_MEM},
    {"h100x2", "the lent machine: 2 x H100 joined by 18 NVLink 4 links", 1, 2, 989e12, 3.35e12, 132,
     450e9, 0.5e-6, 1, 0, 0, 0, 0, "h100x2", H100_MEM},
    {"h100x4", "4 x H100 of one HGX board (the nvidia-h100-x4 kind), NVSwitch", 1, 4, 989e12,
     3.35e12, 132, 450e9, 0.5e-6, 0, 0, 0, 0, 0, "h100x4", H100_MEM},
    {"h200x4", "4 x H200 of one HGX board (the nvidia-h200-x4 kind), NVSwitch", 1, 4, 989e12,
     4.8e12, 132, 478.116e9, 0.5e-6, 0, 0, 0, 0, 0, "h200x4", H200_MEM},
    {"dgx8", "one DGX H100: 8 x H100, NVSwitch", 1, 8, 989e12, 3.35e12, 132, 450e9, 0.5e-6, 0, 0, 0,
     0, 0, "h100-megatron", H100_MEM},
    {"dgx16", "2 DGX H100, NVSwitch, 8 x 400G NICs per node, rail-optimised", 2, 8, 989e12, 3.35e12,
     132, 450e9, 0.5e-6, 0, 50e9, 1.0e-6, 32, 0.5e-6, "h100-megatron", H100_MEM},
    {"dgx64", "8 DGX H100, rail-optimised fat tree", 8, 8, 989e12, 3.35e12, 132, 450e9, 0.5e-6, 0,
     50e9, 1.0e-6, 32, 0.5e-6, "h100-megatron", H100_MEM},
    {"dgx256", "32 DGX H100, rail-optimised fat tree", 32, 8, 989e12, 3.35e12, 132, 450e9, 0.5e-6,
     0, 50e9, 1.0e-6, 16, 0.5e-6, "h100-megatron", H100_MEM},
    {"dgx1024", "128 DGX H100, rail-optimised fat tree", 128, 8, 989e12, 3.35e12, 132, 450e9,
     0.5e-6, 0, 50e9, 1.0e-6, 32, 0.5e-6, "h100-megatron", H100_MEM},
    {"nvl72", "one 72-GPU NVLink domain (GB200 NVL72)", 1, 72, 2.25e15, 8e12, 148, 900e9, 0.5e-6, 0,
     0, 0, 0, 0, NULL, GB200_MEM},
};

static void route(FILE *f, const char *ind, const char *src, const char *dst, const char *link) {
    fprintf(f, "%s<route src=\"%s\" dst=\"%s\"><link_ctn id=\"%s\" direction=\"UP\"/></route>\n",
            ind, src, dst, link);
}

static void link_decl(FILE *f, const char *ind, const char *id, double bw, double lat) {
    fprintf(f,
            "%s<link id=\"%s\" bandwidth=\"%.6gBps\" latency=\"%.6gs\" "
            "sharing_policy=\"SPLITDUPLEX\"/>\n",
            ind, id, bw, lat);
}

/* One edge of the routing graph: a router/link declaration (pass 0) or its route (pass 1). */
static void edge(FILE *f, const char *ind, int pass, const char *a, const char *b, const char *link,
                 double bw, double lat) {
    if (pass == 0)
        link_decl(f, ind, link, bw, lat);
    else
        route(f, ind, a, b, link);
}

static void gpu_host(FILE *f, const topo *t, int g, const char *ind) {
    fprintf(f, "%s<host id=\"gpu%d\" speed=\"%.6gf\">\n", ind, g, t->peak_flops);
    fprintf(f, "%s  <prop id=\"peak_flops\" value=\"%.6g\"/>\n", ind, t->peak_flops);
    fprintf(f, "%s  <prop id=\"hbm_bw\" value=\"%.6g\"/>\n", ind, t->hbm_bw);
    fprintf(f, "%s  <prop id=\"hbm_bytes\" value=\"%.0f\"/>\n", ind, t->hbm_bytes);
    fprintf(f, "%s  <prop id=\"sm_count\" value=\"%d\"/>\n", ind, t->sms);
    fprintf(f, "%s  <prop id=\"node\" value=\"%d\"/>\n", ind, g / t->gpn);
    fprintf(f, "%s  <prop id=\"local_index\" value=\"%d\"/>\n", ind, g % t->gpn);
    fprintf(f, "%s  <prop id=\"gpus_per_node\" value=\"%d\"/>\n", ind, t->gpn);
    fprintf(f, "%s</host>\n", ind);
}

/* The leaves of rail r and its spine (pass 0: routers and links, pass 1: routes), and the link of
 * each NIC to its leaf; the NIC's end is host `nic_fmt` of the GPU (gpu%d: the GPU itself). */
static void write_rail(FILE *f, const topo *t, const char *ind, int pass, int r,
                       const char *nic_fmt) {
    char a[64], b[64], l[64];
    int leaves = (t->nodes + t->nodes_per_leaf - 1) / t->nodes_per_leaf;
    if (pass == 0) {
        for (int lf = 0; lf < leaves; lf++)
            fprintf(f, "%s<router id=\"leaf%d_%d\"/>\n", ind, r, lf);
        if (leaves > 1) fprintf(f, "%s<router id=\"spine%d\"/>\n", ind, r);
    }
    for (int lf = 0; lf < leaves && leaves > 1; lf++) {
        /* non-blocking: the uplink carries every NIC of the leaf at full rate */
        snprintf(l, sizeof l, "up%d_%d", r, lf);
        snprintf(a, sizeof a, "leaf%d_%d", r, lf);
        snprintf(b, sizeof b, "spine%d", r);
        edge(f, ind, pass, a, b, l, t->nic_bw * t->nodes_per_leaf, t->spine_lat);
    }
    for (int nd = 0; nd < t->nodes; nd++) {
        int g = nd * t->gpn + r;
        snprintf(l, sizeof l, "nic%d", g);
        snprintf(a, sizeof a, nic_fmt, g);
        snprintf(b, sizeof b, "leaf%d_%d", r, nd / t->nodes_per_leaf);
        edge(f, ind, pass, a, b, l, t->nic_bw, t->nic_lat);
    }
}

/* The flat layout: every GPU, NVSwitch router, rail switch and link in the one zone (any number
 * of nodes; the bundled single-node files, and with --flat the clusters). */
static void write_flat_network(FILE *f, const topo *t, int pass) {
    char a[64], b[64], l[64];
    if (t->direct_pair) {
        edge(f, "    ", pass, "gpu0", "gpu1", "nvl0_1", t->nvlink_bw, 2 * t->nvlink_lat);
        return;
    }
    for (int nd = 0; nd < t->nodes; nd++) {
        snprintf(b, sizeof b, "nvsw%d", nd);
        if (pass == 0) fprintf(f, "    <router id=\"%s\"/>\n", b);
        for (int i = 0; i < t->gpn; i++) {
            snprintf(l, sizeof l, "nvl%d", nd * t->gpn + i);
            snprintf(a, sizeof a, "gpu%d", nd * t->gpn + i);
            edge(f, "    ", pass, a, b, l, t->nvlink_bw, t->nvlink_lat);
        }
    }
    for (int r = 0; r < t->gpn && t->nodes > 1; r++)
        write_rail(f, t, "    ", pass, r, "gpu%d");
}

/* Node nd of a cluster: a zone with Full routing whose GPU-to-GPU routes are the sender's NVLink
 * out and the receiver's NVLink in (the flat layout's routes through the NVSwitch router). */
static void write_node_zone(FILE *f, const topo *t, int nd) {
    char l[64];
    int g0 = nd * t->gpn;
    fprintf(f, "    <zone id=\"node%d\" routing=\"Full\">\n", nd);
    for (int i = 0; i < t->gpn; i++)
        gpu_host(f, t, g0 + i, "      ");
    for (int i = 0; i < t->gpn; i++) {
        snprintf(l, sizeof l, "nvl%d", g0 + i);
        link_decl(f, "      ", l, t->nvlink_bw, t->nvlink_lat);
    }
    /* symmetric: the route back is the same links in the other direction */
    for (int i = 0; i < t->gpn; i++)
        for (int j = i + 1; j < t->gpn; j++)
            fprintf(f,
                    "      <route src=\"gpu%d\" dst=\"gpu%d\"><link_ctn id=\"nvl%d\" "
                    "direction=\"UP\"/><link_ctn id=\"nvl%d\" direction=\"DOWN\"/></route>\n",
                    g0 + i, g0 + j, g0 + i, g0 + j);
    fprintf(f, "    </zone>\n");
}

/* Rail r of a cluster: a zone with the NIC hosts gpu<g>.nic of the GPUs g of local index r and
 * the rail's switches (Floyd routing: shortest routes over these edges). */
static void write_rail_zone(FILE *f, const topo *t, int r) {
    fprintf(f, "    <zone id=\"rail%d\" routing=\"Floyd\">\n", r);
    for (int nd = 0; nd < t->nodes; nd++)
        fprintf(f, "      <host id=\"gpu%d.nic\" speed=\"1f\"/>\n", nd * t->gpn + r);
    for (int pass = 0; pass < 2; pass++)
        write_rail(f, t, "      ", pass, r, "gpu%d.nic");
    fprintf(f, "    </zone>\n");
}

static int write_topo(const topo *t, const char *dir, int flat) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.xml", dir, t->name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    int n = t->nodes * t->gpn, zoned = t->nodes > 1 && !flat;
    fprintf(
        f,
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n");
    fprintf(f, "<!-- %s: %s. %d GPUs. Generated by sim/topos/gen_topos.c: do not edit. -->\n",
            t->name, t->what, n);
    /* zoned: no routes between the zones (epsim never asks for one) */
    fprintf(f, "<platform version=\"4.1\">\n  <zone id=\"%s\" routing=\"%s\">\n", t->name,
            zoned ? "Full" : "DijkstraCache");
    fprintf(f, "    <prop id=\"gpus_per_node\" value=\"%d\"/>\n", t->gpn);
    if (t->calib) fprintf(f, "    <prop id=\"calibration\" value=\"%s\"/>\n", t->calib);
    if (zoned) {
        for (int nd = 0; nd < t->nodes; nd++)
            write_node_zone(f, t, nd);
        for (int r = 0; r < t->gpn; r++)
            write_rail_zone(f, t, r);
    } else {
        for (int g = 0; g < n; g++)
            gpu_host(f, t, g, "    ");
        /* SimGrid wants every router and link declared before the routes that use them: pass 0
         * writes routers and links, pass 1 the routes. Bandwidth in bytes/s, latency in s. */
        for (int pass = 0; pass < 2; pass++)
            write_flat_network(f, t, pass);
    }
    fprintf(f, "  </zone>\n</platform>\n");
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int flat = argc == 3 && strcmp(argv[1], "--flat") == 0;
    if (argc != 2 + flat) {
        fprintf(stderr, "usage: gen_topos [--flat] OUTDIR\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof TOPOS / sizeof TOPOS[0]; i++)
        if (write_topo(&TOPOS[i], argv[1 + flat], flat) != 0) return 1;
    return 0;
}
