/* gen_topos: writes the bundled SimGrid platform files of sim/topos/ (docs/epsim.md, "Topologies").
 *
 * Usage: gen_topos OUTDIR      writes every bundled topology as OUTDIR/<name>.xml
 * The files in the repository are this program's output; tests/sim checks that regenerating them
 * gives identical bytes, so edit this program, not the XML.
 *
 * Shape of every file: one flat zone with DijkstraCache routing. A GPU is a host named gpu<rank>
 * with properties peak_flops (dense bf16 flop/s), hbm_bw (bytes/s), hbm_bytes (GPU memory),
 * sm_count, node, local_index, gpus_per_node; the zone's property calibration names the default
 * calibration file. Inside a node, each GPU has one full-duplex NVLink link to the node's NVSwitch
 * router (or, for two GPUs without a switch, one direct link). Across nodes (rail-optimised): the
 * NIC of GPU i connects to a leaf switch of rail i; leaves of one rail meet at a rail spine through
 * a non-blocking uplink. Rails are not joined: cross-rail traffic goes over NVLink to the GPU on
 * the destination's rail first (PXN), as NCCL and DeepEP do; epsim decomposes it that way.
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
 * nvidia-h100-x1), H200 143771 MiB (../shared/hw/h200x2.md); GB200 186 GB (NVL72 datasheet:
 * 13.4 TB HBM3e over 72 GPUs). */
#define H100_MEM  (81559.0 * 1048576)
#define H200_MEM  (143771.0 * 1048576)
#define GB200_MEM 186e9

/* H100/H200 SXM: 989 TFLOP/s dense bf16, 132 SMs. NVLink 4: 18 links; H100 25 GB/s per link
 * (450 GB/s), the lent H200 pair 26.562 GB/s per link (478 GB/s, ../shared/hw/h200x2.md).
 * NDR InfiniBand 400 Gb/s = 50 GB/s per NIC. NVL72 (GB200): 2.25 PFLOP/s dense bf16 (B200
 * datasheet), 8 TB/s HBM3e, 148 SMs, NVLink 5 900 GB/s per direction.
 * Default calibrations (docs/calibration.md): the lent H200 machines their own; the DGX H100
 * topologies the compute of one measured H100 with their own link figures; NVL72 none. */
static const topo TOPOS[] = {
    {"h200x2", "the lent machine: 2 x H200 joined by 18 NVLink 4 links", 1, 2, 989e12, 4.8e12, 132,
     478.116e9, 0.5e-6, 1, 0, 0, 0, 0, "h200x2", H200_MEM},
    {"h200x4", "4 x H200 of one HGX board (the nvidia-h200-x4 kind), NVSwitch", 1, 4, 989e12,
     4.8e12, 132, 478.116e9, 0.5e-6, 0, 0, 0, 0, 0, "h200x4", H200_MEM},
    {"dgx8", "one DGX H100: 8 x H100, NVSwitch", 1, 8, 989e12, 3.35e12, 132, 450e9, 0.5e-6, 0, 0, 0,
     0, 0, "h100", H100_MEM},
    {"dgx16", "2 DGX H100, NVSwitch, 8 x 400G NICs per node, rail-optimised", 2, 8, 989e12, 3.35e12,
     132, 450e9, 0.5e-6, 0, 50e9, 1.0e-6, 32, 0.5e-6, "h100", H100_MEM},
    {"dgx64", "8 DGX H100, rail-optimised fat tree", 8, 8, 989e12, 3.35e12, 132, 450e9, 0.5e-6, 0,
     50e9, 1.0e-6, 32, 0.5e-6, "h100", H100_MEM},
    {"dgx256", "32 DGX H100, rail-optimised fat tree", 32, 8, 989e12, 3.35e12, 132, 450e9, 0.5e-6,
     0, 50e9, 1.0e-6, 16, 0.5e-6, "h100", H100_MEM},
    {"dgx1024", "128 DGX H100, rail-optimised fat tree", 128, 8, 989e12, 3.35e12, 132, 450e9,
     0.5e-6, 0, 50e9, 1.0e-6, 32, 0.5e-6, "h100", H100_MEM},
    {"nvl72", "one 72-GPU NVLink domain (GB200 NVL72)", 1, 72, 2.25e15, 8e12, 148, 900e9, 0.5e-6, 0,
     0, 0, 0, 0, NULL, GB200_MEM},
};

static void route(FILE *f, const char *src, const char *dst, const char *link) {
    fprintf(f, "    <route src=\"%s\" dst=\"%s\"><link_ctn id=\"%s\" direction=\"UP\"/></route>\n",
            src, dst, link);
}

static void link_decl(FILE *f, const char *id, double bw, double lat) {
    fprintf(f,
            "    <link id=\"%s\" bandwidth=\"%.6gBps\" latency=\"%.6gs\" "
            "sharing_policy=\"SPLITDUPLEX\"/>\n",
            id, bw, lat);
}

/* One edge of the routing graph: a router/link declaration (pass 0) or its route (pass 1). */
static void edge(FILE *f, int pass, const char *a, const char *b, const char *link, double bw,
                 double lat) {
    if (pass == 0)
        link_decl(f, link, bw, lat);
    else
        route(f, a, b, link);
}

static void write_network(FILE *f, const topo *t, int pass) {
    char a[64], b[64], l[64];
    if (t->direct_pair) {
        edge(f, pass, "gpu0", "gpu1", "nvl0_1", t->nvlink_bw, 2 * t->nvlink_lat);
        return;
    }
    for (int nd = 0; nd < t->nodes; nd++) {
        snprintf(b, sizeof b, "nvsw%d", nd);
        if (pass == 0) fprintf(f, "    <router id=\"%s\"/>\n", b);
        for (int i = 0; i < t->gpn; i++) {
            snprintf(l, sizeof l, "nvl%d", nd * t->gpn + i);
            snprintf(a, sizeof a, "gpu%d", nd * t->gpn + i);
            edge(f, pass, a, b, l, t->nvlink_bw, t->nvlink_lat);
        }
    }
    if (t->nodes <= 1) return;
    int leaves = (t->nodes + t->nodes_per_leaf - 1) / t->nodes_per_leaf;
    for (int r = 0; r < t->gpn; r++) {
        if (pass == 0) {
            for (int lf = 0; lf < leaves; lf++)
                fprintf(f, "    <router id=\"leaf%d_%d\"/>\n", r, lf);
            if (leaves > 1) fprintf(f, "    <router id=\"spine%d\"/>\n", r);
        }
        if (leaves > 1) {
            for (int lf = 0; lf < leaves; lf++) {
                /* non-blocking: the uplink carries every NIC of the leaf at full rate */
                snprintf(l, sizeof l, "up%d_%d", r, lf);
                snprintf(a, sizeof a, "leaf%d_%d", r, lf);
                snprintf(b, sizeof b, "spine%d", r);
                edge(f, pass, a, b, l, t->nic_bw * t->nodes_per_leaf, t->spine_lat);
            }
        }
        for (int nd = 0; nd < t->nodes; nd++) {
            int g = nd * t->gpn + r;
            snprintf(l, sizeof l, "nic%d", g);
            snprintf(a, sizeof a, "gpu%d", g);
            snprintf(b, sizeof b, "leaf%d_%d", r, nd / t->nodes_per_leaf);
            edge(f, pass, a, b, l, t->nic_bw, t->nic_lat);
        }
    }
}

static int write_topo(const topo *t, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.xml", dir, t->name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    int n = t->nodes * t->gpn;
    fprintf(
        f,
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n");
    fprintf(f, "<!-- %s: %s. %d GPUs. Generated by sim/topos/gen_topos.c: do not edit. -->\n",
            t->name, t->what, n);
    fprintf(f, "<platform version=\"4.1\">\n  <zone id=\"%s\" routing=\"DijkstraCache\">\n",
            t->name);
    fprintf(f, "    <prop id=\"gpus_per_node\" value=\"%d\"/>\n", t->gpn);
    if (t->calib) fprintf(f, "    <prop id=\"calibration\" value=\"%s\"/>\n", t->calib);
    for (int g = 0; g < n; g++) {
        fprintf(f, "    <host id=\"gpu%d\" speed=\"%.6gf\">\n", g, t->peak_flops);
        fprintf(f, "      <prop id=\"peak_flops\" value=\"%.6g\"/>\n", t->peak_flops);
        fprintf(f, "      <prop id=\"hbm_bw\" value=\"%.6g\"/>\n", t->hbm_bw);
        fprintf(f, "      <prop id=\"hbm_bytes\" value=\"%.0f\"/>\n", t->hbm_bytes);
        fprintf(f, "      <prop id=\"sm_count\" value=\"%d\"/>\n", t->sms);
        fprintf(f, "      <prop id=\"node\" value=\"%d\"/>\n", g / t->gpn);
        fprintf(f, "      <prop id=\"local_index\" value=\"%d\"/>\n", g % t->gpn);
        fprintf(f, "      <prop id=\"gpus_per_node\" value=\"%d\"/>\n", t->gpn);
        fprintf(f, "    </host>\n");
    }
    /* SimGrid wants every router and link declared before the routes that use them: pass 0
     * writes routers and links, pass 1 the routes. Bandwidth in bytes/s, latency in seconds. */
    for (int pass = 0; pass < 2; pass++)
        write_network(f, t, pass);
    fprintf(f, "  </zone>\n</platform>\n");
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen_topos OUTDIR\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof TOPOS / sizeof TOPOS[0]; i++)
        if (write_topo(&TOPOS[i], argv[1]) != 0) return 1;
    return 0;
}
