/* A platform file checked before SimGrid reads it (sim_platform_check.h): a small XML reader, then
 * the names, numbers, GPU hosts and routes epsim relies on. */
#include "sim_platform_check.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH    64
#define MAX_ELEMENTS (4 << 20)
#define MAX_ATTRS    32
#define MAX_GPUS     (1 << 20)

typedef enum {
    E_PLATFORM,
    E_ZONE,
    E_HOST,
    E_ROUTER,
    E_LINK,
    E_ROUTE,
    E_ZONEROUTE,
    E_LINKCTN,
    E_PROP,
    E_NKINDS
} kind_t;
static const char *const k_kind[E_NKINDS] = {"platform", "zone",      "host",     "router", "link",
                                             "route",    "zoneRoute", "link_ctn", "prop"};
/* allowed attributes of each element, NULL-terminated */
static const char *const k_attrs[E_NKINDS][8] = {
    {"version", NULL},
    {"id", "routing", NULL},
    {"id", "speed", "core", "pstate", "coordinates", NULL},
    {"id", "coordinates", NULL},
    {"id", "bandwidth", "latency", "sharing_policy", NULL},
    {"src", "dst", "symmetrical", NULL},
    {"src", "dst", "gw_src", "gw_dst", "symmetrical", NULL},
    {"id", "direction", NULL},
    {"id", "value", NULL},
};

typedef enum { R_FULL, R_FLOYD, R_DIJKSTRA, R_DIJKSTRACACHE, R_NONE } routing_t;
static const char *const k_routing[] = {"Full", "Floyd", "Dijkstra", "DijkstraCache", "None", NULL};

typedef struct {
    kind_t kind;
    int parent, line, attr0, nattr;
} elem;

typedef struct {
    char *key, *val;
} attr;

/* a string -> int hash table (open addressing) */
typedef struct {
    char **key;
    int *val;
    size_t cap, n;
} table;

typedef struct {
    int src, dst, gw_src, gw_dst; /* netpoints; gateways -1 for a plain route */
    int next;                     /* next edge leaving src (graph zones) */
} edge;

typedef struct {
    kind_t kind;
    int zone;  /* the zone that holds it (a zone netpoint: its parent zone), -1 for the root */
    int elem;  /* its element */
    int self;  /* a zone's netpoint: the zone; else -1 */
    int first; /* first edge leaving it, -1 */
    int local; /* index among its zone's members */
} netpoint;

typedef struct {
    int np, parent, depth, elem;
    routing_t routing;
    int nmem, capmem;
    int *mem;  /* member netpoints, by local index */
    int **bfs; /* graph zones: [0] the edge reaching each member from [1][0], the latest source */
} zone;

typedef struct {
    const char *name; /* the file, for messages */
    char *err;
    const char *p, *end;
    int line;
    elem *el;
    int nel, capel;
    attr *at;
    int nat, capat;
    int *zone_of_elem; /* a zone element's zone index, else -1 */
    table np_by_name;
    netpoint *np;
    int nnp, capnp;
    zone *zn;
    int nzone, capzone;
    table link_by_name;  /* 1 a link, 2 a SPLITDUPLEX link (X_UP, X_DOWN are links too) */
    table route_by_pair; /* "src dst" netpoint ids -> edge */
    edge *ed;
    int ned, caped;
} ctx;

/* The error line: "platform FILE[:LINE]: message", control bytes of echoed text as \xNN. */
static int fail(ctx *c, int line, const char *fmt, ...) {
    char msg[EP_ERRLEN], raw[EP_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(raw, sizeof raw, "platform %.200s:%d: %s", c->name, line, msg);
    else
        snprintf(raw, sizeof raw, "platform %.200s: %s", c->name, msg);
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p && k + 5 < EP_ERRLEN; p++)
        if (*p < 0x20 || *p == 0x7f)
            k += (size_t)snprintf(c->err + k, EP_ERRLEN - k, "\\x%02x", *p);
        else
            c->err[k++] = (char)*p;
    c->err[k] = 0;
    return -1;
}

static int grow(void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, (size_t)nc * size);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* --- hash table --------------------------------------------------------------------------- */

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int *table_find(table *t, const char *key) {
    if (!t->cap) return NULL;
    for (size_t i = hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->key[i]) return NULL;
        if (strcmp(t->key[i], key) == 0) return &t->val[i];
    }
}

/* Adds key (copied); returns 0, 1 when present already, -1 out of memory. */
static int table_add(table *t, const char *key, int val) {
    if (table_find(t, key)) return 1;
    if ((t->n + 1) * 2 > t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        char **nk = calloc(nc, sizeof *nk);
        int *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) return free(nk), free(nv), -1;
        for (size_t i = 0; i < t->cap; i++)
            if (t->key[i]) {
                size_t j = hash(t->key[i]) & (nc - 1);
                while (nk[j])
                    j = (j + 1) & (nc - 1);
                nk[j] = t->key[i];
                nv[j] = t->val[i];
            }
        free(t->key);
        free(t->val);
        t->key = nk;
        t->val = nv;
        t->cap = nc;
    }
    size_t i = hash(key) & (t->cap - 1);
    while (t->key[i])
        i = (i + 1) & (t->cap - 1);
    t->key[i] = strdup(key);
    if (!t->key[i]) return -1;
    t->val[i] = val;
    t->n++;
    return 0;
}

static void table_free(table *t) {
    for (size_t i = 0; i < t->cap; i++)
        free(t->key[i]);
    free(t->key);
    free(t->val);
    memset(t, 0, sizeof *t);
}

/* --- XML reader ----------------------------------------------------------------------------- */

/* Text only: no NUL, no control bytes but tab and line ends, UTF-8. */
static int check_bytes(ctx *c, const unsigned char *s, size_t n) {
    int line = 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = s[i];
        if (b == '\n') line++;
        if (b == 0) return fail(c, line, "binary data (a NUL byte): not a text file");
        if ((b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7f)
            return fail(c, line, "control byte 0x%02x: not a text file", b);
        if (b >= 0x80) {
            int k = b >= 0xF0 && b <= 0xF4  ? 3
                    : b >= 0xE0 && b < 0xF0 ? 2
                    : b >= 0xC2 && b < 0xE0 ? 1
                                            : -1;
            if (k < 0 || i + (size_t)k >= n) return fail(c, line, "byte 0x%02x: not UTF-8 text", b);
            for (int j = 1; j <= k; j++)
                if ((s[i + j] & 0xC0) != 0x80)
                    return fail(c, line, "byte 0x%02x: not UTF-8 text", b);
            i += (size_t)k;
        }
    }
    return 0;
}

static int at_str(ctx *c, const char *s) {
    size_t n = strlen(s);
    return (size_t)(c->end - c->p) >= n && memcmp(c->p, s, n) == 0;
}

static void skip_space(ctx *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        if (*c->p == '\n') c->line++;
        c->p++;
    }
}

/* Skips to just after `until`, counting lines; -1 when the text ends first. */
static int skip_past(ctx *c, const char *until) {
    size_t n = strlen(until);
    while (c->p < c->end) {
        if ((size_t)(c->end - c->p) >= n && memcmp(c->p, until, n) == 0) {
            c->p += n;
            return 0;
        }
        if (*c->p == '\n') c->line++;
        c->p++;
    }
    return -1;
}

static int name_start(char ch) {
    return isalpha((unsigned char)ch) || ch == '_' || ch == ':';
}

static int name_char(char ch) {
    return isalnum((unsigned char)ch) || ch == '_' || ch == ':' || ch == '.' || ch == '-';
}

static int read_name(ctx *c, char *out, size_t len) {
    size_t k = 0;
    if (c->p >= c->end || !name_start(*c->p)) return -1;
    while (c->p < c->end && name_char(*c->p)) {
        if (k + 1 >= len) return -1;
        out[k++] = *c->p++;
    }
    out[k] = 0;
    return 0;
}

/* Decodes an attribute value between quotes into a new string. */
static char *read_value(ctx *c) {
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '<') return NULL;
        if (*c->p == '\n') c->line++;
        c->p++;
    }
    if (c->p >= c->end) return NULL;
    size_t n = (size_t)(c->p - start);
    c->p++; /* the closing quote */
    char *v = malloc(n + 1);
    if (!v) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (start[i] != '&') {
            v[k++] = start[i++];
            continue;
        }
        static const struct {
            const char *ent;
            char ch;
        } ents[] = {
            {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
        int done = 0;
        for (size_t e = 0; e < 5 && !done; e++) {
            size_t el = strlen(ents[e].ent);
            if (n - i >= el && memcmp(start + i, ents[e].ent, el) == 0) {
                v[k++] = ents[e].ch;
                i += el;
                done = 1;
            }
        }
        if (!done) { /* a numeric reference of a printable ASCII character, nothing else */
            unsigned long code = 0;
            size_t j = i + 2;
            int hex = j < n && start[j] == 'x';
            j += (size_t)hex;
            size_t digits = 0;
            while (j < n && digits < 8 &&
                   (hex ? isxdigit((unsigned char)start[j]) : isdigit((unsigned char)start[j]))) {
                code = code * (hex ? 16 : 10) +
                       (unsigned long)(isdigit((unsigned char)start[j])
                                           ? start[j] - '0'
                                           : (tolower((unsigned char)start[j]) - 'a' + 10));
                j++;
                digits++;
            }
            if (i + 1 >= n || start[i + 1] != '#' || !digits || j >= n || start[j] != ';' ||
                code < 0x20 || code > 0x7e) {
                free(v);
                return NULL;
            }
            v[k++] = (char)code;
            i = j + 1;
        }
    }
    v[k] = 0;
    return v;
}

static int kind_of(const char *name) {
    for (int k = 0; k < E_NKINDS; k++)
        if (strcmp(k_kind[k], name) == 0) return k;
    return -1;
}

static int parse_start_tag(ctx *c, int parent, int *self_closed) {
    char name[64];
    int line = c->line;
    c->p++; /* '<' */
    if (read_name(c, name, sizeof name) != 0) return fail(c, line, "malformed tag");
    int k = kind_of(name);
    if (k < 0)
        return fail(c, line,
                    "element <%.40s> is not supported (epsim reads zones of hosts, routers, links "
                    "and routes: docs/epsim.md, \"Platform files\")",
                    name);
    if (grow((void **)&c->el, &c->capel, c->nel + 1, sizeof *c->el))
        return fail(c, line, "out of memory");
    if (c->nel >= MAX_ELEMENTS) return fail(c, line, "more than %d elements", MAX_ELEMENTS);
    elem *e = &c->el[c->nel];
    e->kind = (kind_t)k;
    e->parent = parent;
    e->line = line;
    e->attr0 = c->nat;
    e->nattr = 0;
    for (;;) {
        const char *before = c->p;
        skip_space(c);
        if (c->p >= c->end)
            return fail(c, line, "the file ends inside the <%s> tag: truncated?", name);
        if (*c->p == '>') {
            c->p++;
            *self_closed = 0;
            break;
        }
        if (at_str(c, "/>")) {
            c->p += 2;
            *self_closed = 1;
            break;
        }
        if (c->p == before) return fail(c, c->line, "malformed <%s> tag", name);
        char key[64];
        if (read_name(c, key, sizeof key) != 0)
            return fail(c, c->line, "malformed attribute in <%s>", name);
        skip_space(c);
        if (c->p >= c->end || *c->p != '=')
            return fail(c, c->line, "attribute %s of <%s> has no value", key, name);
        c->p++;
        skip_space(c);
        if (c->p >= c->end || (*c->p != '"' && *c->p != '\''))
            return fail(c, c->line, "attribute %s of <%s>: value not quoted", key, name);
        int vline = c->line;
        char *val = read_value(c);
        if (!val && c->p >= c->end)
            return fail(c, vline, "the file ends inside the <%s> tag: truncated?", name);
        if (!val)
            return fail(c, vline,
                        "attribute %s of <%s>: a '<' or a character reference epsim does not take",
                        key, name);
        int ok = 0;
        for (int a = 0; k_attrs[k][a]; a++)
            ok |= strcmp(k_attrs[k][a], key) == 0;
        if (!ok) {
            free(val);
            return fail(c, line, "<%s> takes no attribute %s", name, key);
        }
        for (int a = 0; a < e->nattr; a++)
            if (strcmp(c->at[e->attr0 + a].key, key) == 0) {
                free(val);
                return fail(c, line, "attribute %s given twice in <%s>", key, name);
            }
        if (e->nattr >= MAX_ATTRS || grow((void **)&c->at, &c->capat, c->nat + 1, sizeof *c->at)) {
            free(val);
            return fail(c, line, "too many attributes");
        }
        c->at[c->nat].key = strdup(key);
        c->at[c->nat].val = val;
        if (!c->at[c->nat].key) return fail(c, line, "out of memory");
        c->nat++;
        e->nattr++;
    }
    return c->nel++;
}

static int parse_xml(ctx *c) {
    int stack[MAX_DEPTH], depth = 0, root_done = 0, seen_root = 0;
    if (at_str(c, "\xEF\xBB\xBF")) c->p += 3;
    for (;;) {
        skip_space(c);
        if (c->p >= c->end) break;
        int line = c->line;
        if (at_str(c, "<?")) {
            if (seen_root) return fail(c, line, "processing instruction after the start");
            if (skip_past(c, "?>")) return fail(c, line, "unterminated <? ... ?>");
        } else if (at_str(c, "<!--")) {
            if (skip_past(c, "-->")) return fail(c, line, "unterminated comment");
        } else if (at_str(c, "<!DOCTYPE")) {
            if (seen_root) return fail(c, line, "DOCTYPE after the start");
            if (skip_past(c, ">")) return fail(c, line, "unterminated DOCTYPE");
        } else if (at_str(c, "<!")) {
            return fail(c, line, "CDATA and declarations are not taken");
        } else if (at_str(c, "</")) {
            char name[64];
            c->p += 2;
            if (read_name(c, name, sizeof name) != 0) return fail(c, line, "malformed end tag");
            skip_space(c);
            if (c->p >= c->end || *c->p != '>')
                return fail(c, line, "malformed end tag </%s", name);
            c->p++;
            if (depth == 0 || strcmp(k_kind[c->el[stack[depth - 1]].kind], name) != 0)
                return fail(c, line, "end tag </%s> does not close %s%s%s", name,
                            depth ? "<" : "any element",
                            depth ? k_kind[c->el[stack[depth - 1]].kind] : "", depth ? ">" : "");
            depth--;
            if (depth == 0) root_done = 1;
        } else if (*c->p == '<') {
            if (root_done) return fail(c, line, "a second top-level element");
            int closed = 0, e = parse_start_tag(c, depth ? stack[depth - 1] : -1, &closed);
            if (e < 0) return -1;
            seen_root = 1;
            if (!closed) {
                if (depth == MAX_DEPTH)
                    return fail(c, line, "elements nested deeper than %d", MAX_DEPTH);
                stack[depth++] = e;
            } else if (depth == 0) {
                root_done = 1;
            }
        } else {
            return fail(c, line, "unexpected text '%c' (a platform holds elements only)",
                        isprint((unsigned char)*c->p) ? *c->p : '?');
        }
    }
    if (depth > 0)
        return fail(c, c->line, "the file ends inside <%s> (opened at line %d): truncated?",
                    k_kind[c->el[stack[depth - 1]].kind], c->el[stack[depth - 1]].line);
    if (!seen_root) return fail(c, c->line, "no <platform> element: empty or not a platform file");
    return 0;
}

/* --- values ----------------------------------------------------------------------------------- */

static const char *get(const ctx *c, const elem *e, const char *key) {
    for (int a = 0; a < e->nattr; a++)
        if (strcmp(c->at[e->attr0 + a].key, key) == 0) return c->at[e->attr0 + a].val;
    return NULL;
}

static const char *need(ctx *c, const elem *e, const char *key) {
    const char *v = get(c, e, key);
    if (!v) fail(c, e->line, "<%s> needs the attribute %s", k_kind[e->kind], key);
    return v;
}

/* A decimal number (no inf, nan or hex) followed by one of units (NULL-terminated, scale after
 * each) or nothing. Returns 0 with *out, or -1. */
static int number_unit(const char *s, const char *const *units, const double *scale, double *out) {
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1]))) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v)) return -1;
    for (const char *q = s; q < end; q++)
        if (!isdigit((unsigned char)*q) && !strchr("+-.eE", *q)) return -1;
    if (!*end) {
        *out = v;
        return 0;
    }
    for (int i = 0; units[i]; i++)
        if (strcmp(end, units[i]) == 0) {
            *out = v * scale[i];
            return isfinite(*out) ? 0 : -1;
        }
    return -1;
}

static const char *const k_speed_u[] = {
    "f",      "kf",     "Mf",     "Gf",     "Tf",     "Pf",     "Ef",     "Zf",     "Yf", "flops",
    "kflops", "Mflops", "Gflops", "Tflops", "Pflops", "Eflops", "Zflops", "Yflops", NULL};
static const double k_speed_s[] = {1, 1e3, 1e6, 1e9, 1e12, 1e15, 1e18, 1e21, 1e24,
                                   1, 1e3, 1e6, 1e9, 1e12, 1e15, 1e18, 1e21, 1e24};
static const char *const k_bw_u[] = {"Bps",   "kBps",  "KBps",  "MBps",  "GBps",  "TBps",
                                     "PBps",  "KiBps", "MiBps", "GiBps", "TiBps", "bps",
                                     "kbps",  "Kbps",  "Mbps",  "Gbps",  "Tbps",  "Pbps",
                                     "Kibps", "Mibps", "Gibps", "Tibps", NULL};
static const double k_bw_s[] = {
    1,     1e3, 1e3, 1e6,   1e9,   1e12,  1e15,   1024.0, 1048576.0, 1073741824.0, 1099511627776.0,
    0.125, 125, 125, 125e3, 125e6, 125e9, 125e12, 128.0,  131072.0,  134217728.0,  137438953472.0};
static const char *const k_time_u[] = {"s", "ms", "us", "ns", "ps", "m", "h", "d", "w", NULL};
static const double k_time_s[] = {1, 1e-3, 1e-6, 1e-9, 1e-12, 60, 3600, 86400, 604800};

static int check_range(ctx *c, const elem *e, const char *key, const char *val,
                       const char *const *u, const double *sc, double lo, double hi, int lo_open) {
    double v;
    if (number_unit(val, u, sc, &v) != 0)
        return fail(c, e->line, "%s=\"%.60s\" of <%s> is not a number with a unit (e.g. %s)", key,
                    val, k_kind[e->kind],
                    u == k_speed_u ? "1e15f"
                    : u == k_bw_u  ? "4.5e11Bps"
                                   : "1us");
    if (lo_open ? !(v > lo) : !(v >= lo))
        return fail(c, e->line, "%s=\"%.60s\" of <%s> must be %s %g", key, val, k_kind[e->kind],
                    lo_open ? ">" : ">=", lo);
    if (v > hi)
        return fail(c, e->line, "%s=\"%.60s\" of <%s> is out of range (at most %g)", key, val,
                    k_kind[e->kind], hi);
    return 0;
}

/* An integer lo..hi written in decimal without a sign or a fraction. */
static int parse_int(const char *s, long lo, long hi, long *out) {
    if (!isdigit((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* --- names and structure -----------------------------------------------------------------------
 */

static const char *id_of(const ctx *c, int np) {
    const char *v = get(c, &c->el[c->np[np].elem], "id");
    return v ? v : "?";
}

static int add_netpoint(ctx *c, const char *name, kind_t kind, int z, int e) {
    int r = table_add(&c->np_by_name, name, c->nnp);
    if (r < 0) return fail(c, 0, "out of memory");
    if (r > 0) {
        const netpoint *o = &c->np[*table_find(&c->np_by_name, name)];
        return fail(c, c->el[e].line,
                    "the name %.100s is declared twice (line %d and here; hosts, routers and zones "
                    "share one name space)",
                    name, c->el[o->elem].line);
    }
    if (grow((void **)&c->np, &c->capnp, c->nnp + 1, sizeof *c->np))
        return fail(c, 0, "out of memory");
    netpoint *n = &c->np[c->nnp];
    n->kind = kind;
    n->zone = z;
    n->elem = e;
    n->self = -1;
    n->first = -1;
    n->local = -1;
    if (z >= 0) {
        zone *zz = &c->zn[z];
        if (grow((void **)&zz->mem, &zz->capmem, zz->nmem + 1, sizeof *zz->mem))
            return fail(c, 0, "out of memory");
        n->local = zz->nmem;
        zz->mem[zz->nmem++] = c->nnp;
    }
    return c->nnp++;
}

static int add_zone(ctx *c, int e, int parent, routing_t r) {
    if (grow((void **)&c->zn, &c->capzone, c->nzone + 1, sizeof *c->zn))
        return fail(c, 0, "out of memory");
    zone *z = &c->zn[c->nzone];
    memset(z, 0, sizeof *z);
    z->parent = parent;
    z->depth = parent >= 0 ? c->zn[parent].depth + 1 : 0;
    z->elem = e;
    z->routing = r;
    z->np = -1;
    return c->nzone++;
}

static int add_edge(ctx *c, int line, int src, int dst, int gs, int gd) {
    char key[48];
    snprintf(key, sizeof key, "%d %d", src, dst);
    int r = table_add(&c->route_by_pair, key, c->ned);
    if (r < 0) return fail(c, 0, "out of memory");
    if (r > 0)
        return fail(c, line, "a second route from %.100s to %.100s", id_of(c, src), id_of(c, dst));
    if (grow((void **)&c->ed, &c->caped, c->ned + 1, sizeof *c->ed))
        return fail(c, 0, "out of memory");
    c->ed[c->ned] = (edge){src, dst, gs, gd, c->np[src].first};
    c->np[src].first = c->ned++;
    return 0;
}

/* Whether netpoint np lies inside zone z (at any depth). */
static int inside(const ctx *c, int np, int z) {
    for (int y = c->np[np].zone; y >= 0; y = c->zn[y].parent)
        if (y == z) return 1;
    return 0;
}

static int lookup_np(ctx *c, const elem *e, const char *key, const char **name) {
    *name = need(c, e, key);
    if (!*name) return -1;
    int *v = table_find(&c->np_by_name, *name);
    if (!v)
        return fail(c, e->line,
                    "%s=\"%.100s\" of <%s> names no host, router or zone declared before it", key,
                    *name, k_kind[e->kind]);
    return *v;
}

static int check_route(ctx *c, int i, int z) {
    const elem *e = &c->el[i];
    const char *zname = get(c, &c->el[c->zn[z].elem], "id");
    if (c->zn[z].routing == R_NONE)
        return fail(c, e->line, "zone %.100s has routing None and takes no routes", zname);
    const char *sn, *dn;
    int s = lookup_np(c, e, "src", &sn);
    if (s < 0) return -1;
    int d = lookup_np(c, e, "dst", &dn);
    if (d < 0) return -1;
    if (s == d) return fail(c, e->line, "a route from %.100s to itself", sn);
    int gs = -1, gd = -1;
    if (e->kind == E_ROUTE) {
        if (c->np[s].kind == E_ZONE || c->np[d].kind == E_ZONE || c->np[s].zone != z ||
            c->np[d].zone != z)
            return fail(c, e->line,
                        "route %.80s -> %.80s: both ends must be hosts or routers of zone %.80s "
                        "(zoneRoute joins zones)",
                        sn, dn, zname);
    } else {
        const char *gsn, *gdn;
        if (c->np[s].kind != E_ZONE || c->np[d].kind != E_ZONE || c->np[s].zone != z ||
            c->np[d].zone != z)
            return fail(c, e->line,
                        "zoneRoute %.80s -> %.80s: both ends must be zones inside zone %.80s", sn,
                        dn, zname);
        gs = lookup_np(c, e, "gw_src", &gsn);
        if (gs < 0) return -1;
        gd = lookup_np(c, e, "gw_dst", &gdn);
        if (gd < 0) return -1;
        if (c->np[gs].kind == E_ZONE || !inside(c, gs, c->np[s].self))
            return fail(c, e->line, "gw_src %.80s is not a host or router inside zone %.80s", gsn,
                        sn);
        if (c->np[gd].kind == E_ZONE || !inside(c, gd, c->np[d].self))
            return fail(c, e->line, "gw_dst %.80s is not a host or router inside zone %.80s", gdn,
                        dn);
    }
    const char *sym = get(c, e, "symmetrical");
    int symmetric = 1;
    if (sym) {
        if (!strcmp(sym, "NO") || !strcmp(sym, "no"))
            symmetric = 0;
        else if (strcmp(sym, "YES") && strcmp(sym, "yes"))
            return fail(c, e->line, "symmetrical=\"%.20s\": YES or NO", sym);
    }
    if (add_edge(c, e->line, s, d, gs, gd)) return -1;
    if (symmetric && add_edge(c, e->line, d, s, gd, gs)) return -1;
    return 0;
}

static int check_link(ctx *c, int i) {
    const elem *e = &c->el[i];
    const char *id = need(c, e, "id"), *bw = need(c, e, "bandwidth");
    if (!id || !bw) return -1;
    const char *lat = get(c, e, "latency"), *sp = get(c, e, "sharing_policy");
    if (check_range(c, e, "bandwidth", bw, k_bw_u, k_bw_s, 0, 1e15, 1)) return -1;
    if (lat && check_range(c, e, "latency", lat, k_time_u, k_time_s, 0, 3600, 0)) return -1;
    int split = 0;
    if (sp) {
        if (!strcmp(sp, "SPLITDUPLEX"))
            split = 1;
        else if (strcmp(sp, "SHARED") && strcmp(sp, "FATPIPE"))
            return fail(c, e->line,
                        "sharing_policy=\"%.30s\" of link %.80s: SHARED, SPLITDUPLEX or FATPIPE",
                        sp, id);
    }
    char names[3][300];
    snprintf(names[0], sizeof names[0], "%s", id);
    snprintf(names[1], sizeof names[1], "%s_UP", id);
    snprintf(names[2], sizeof names[2], "%s_DOWN", id);
    if (strlen(id) > 250) return fail(c, e->line, "link name longer than 250 characters");
    for (int k = 0; k < (split ? 3 : 1); k++) {
        /* value: element index * 4 + type (1 plain, 2 SPLITDUPLEX, 3 one direction of one) */
        int r = table_add(&c->link_by_name, names[k], i * 4 + (split ? (k ? 3 : 2) : 1));
        if (r < 0) return fail(c, 0, "out of memory");
        if (r > 0)
            return fail(c, e->line, "link %.100s is declared twice (line %d and here%s)", names[k],
                        c->el[*table_find(&c->link_by_name, names[k]) / 4].line,
                        k ? "; a SPLITDUPLEX link X also names X_UP and X_DOWN" : "");
    }
    return 0;
}

static int check_link_ctn(ctx *c, int i) {
    const elem *e = &c->el[i];
    const char *id = need(c, e, "id");
    if (!id) return -1;
    const char *dir = get(c, e, "direction");
    if (!dir) dir = "NONE";
    if (strcmp(dir, "UP") && strcmp(dir, "DOWN") && strcmp(dir, "NONE"))
        return fail(c, e->line, "direction=\"%.20s\": UP, DOWN or NONE", dir);
    int *v = table_find(&c->link_by_name, id);
    if (!v) return fail(c, e->line, "link %.100s is not declared before this route", id);
    int type = *v % 4;
    if (type == 2 && !strcmp(dir, "NONE"))
        return fail(c, e->line, "link %.100s is SPLITDUPLEX: give direction UP or DOWN", id);
    if (type != 2 && strcmp(dir, "NONE"))
        return fail(c, e->line, "direction %s on link %.100s, which is not SPLITDUPLEX", dir, id);
    return 0;
}

static int check_host(ctx *c, int i, int z) {
    const elem *e = &c->el[i];
    const char *id = need(c, e, "id");
    if (!id) return -1;
    if (e->kind == E_HOST) {
        const char *speed = need(c, e, "speed");
        if (!speed) return -1;
        int n = 0;
        char one[128];
        for (const char *p = speed;; n++) {
            size_t k = strcspn(p, ",");
            if (k == 0 || k >= sizeof one)
                return fail(c, e->line,
                            "speed=\"%.60s\" of host %.80s: a list of speeds like 1e15f", speed,
                            id);
            memcpy(one, p, k);
            one[k] = 0;
            if (check_range(c, e, "speed", one, k_speed_u, k_speed_s, 0, 1e21, 1)) return -1;
            if (!p[k]) break;
            p += k + 1;
        }
        long v;
        const char *core = get(c, e, "core"), *ps = get(c, e, "pstate");
        if (core && parse_int(core, 1, 1000000, &v))
            return fail(c, e->line, "core=\"%.30s\" of host %.80s: an integer from 1 to 1000000",
                        core, id);
        if (ps && parse_int(ps, 0, n, &v))
            return fail(c, e->line, "pstate=\"%.30s\" of host %.80s: an index into its %d speeds",
                        ps, id, n + 1);
    }
    return add_netpoint(c, id, e->kind, z, i) < 0 ? -1 : 0;
}

/* Walks every element in document order: structure, names, numbers, routes. */
static int check_elements(ctx *c, int **prop_prev, int **last_prop) {
    int nroot = 0;
    int *has_link = calloc((size_t)c->nel + 1, sizeof *has_link);
    c->zone_of_elem = malloc(((size_t)c->nel + 1) * sizeof *c->zone_of_elem);
    *prop_prev = malloc(((size_t)c->nel + 1) * sizeof **prop_prev);
    *last_prop = malloc(((size_t)c->nel + 1) * sizeof **last_prop);
    if (!has_link || !c->zone_of_elem || !*prop_prev || !*last_prop) {
        free(has_link);
        return fail(c, 0, "out of memory");
    }
    for (int i = 0; i < c->nel; i++)
        c->zone_of_elem[i] = (*prop_prev)[i] = (*last_prop)[i] = -1;
    int rc = 0;
    for (int i = 0; i < c->nel && rc == 0; i++) {
        const elem *e = &c->el[i];
        int pk = e->parent >= 0 ? (int)c->el[e->parent].kind : -1;
        int pz = e->parent >= 0 ? c->zone_of_elem[e->parent] : -1;
        const char *where = pk >= 0 ? k_kind[pk] : "the top level";
        switch (e->kind) {
        case E_PLATFORM: {
            if (pk >= 0) return free(has_link), fail(c, e->line, "<platform> inside <%s>", where);
            const char *v = need(c, e, "version");
            if (!v)
                rc = -1;
            else if (strcmp(v, "4") && strcmp(v, "4.1"))
                rc = fail(c, e->line, "platform version \"%.20s\": epsim reads version 4.1", v);
            break;
        }
        case E_ZONE: {
            if (pk != E_PLATFORM && pk != E_ZONE) {
                rc = fail(c, e->line, "<zone> inside %s: zones belong in <platform> or <zone>",
                          where);
                break;
            }
            if (pk == E_PLATFORM && nroot++) {
                rc = fail(c, e->line, "a second top-level zone (a platform has one root zone)");
                break;
            }
            const char *id = need(c, e, "id"), *r = id ? need(c, e, "routing") : NULL;
            if (!r) {
                rc = -1;
                break;
            }
            int k = 0;
            while (k_routing[k] && strcmp(k_routing[k], r))
                k++;
            if (!k_routing[k]) {
                rc = fail(c, e->line,
                          "routing=\"%.40s\" of zone %.80s is not taken (Full, Floyd, Dijkstra, "
                          "DijkstraCache or None)",
                          r, id);
                break;
            }
            int z = add_zone(c, i, pz, (routing_t)k);
            int np = z < 0 ? -1 : add_netpoint(c, id, E_ZONE, pz, i);
            if (np < 0) {
                rc = -1;
                break;
            }
            c->np[np].self = z;
            c->zn[z].np = np;
            c->zone_of_elem[i] = z;
            break;
        }
        case E_HOST:
        case E_ROUTER:
        case E_LINK:
            if (pk != E_ZONE) {
                rc = fail(c, e->line, "<%s> inside %s: it belongs in a <zone>", k_kind[e->kind],
                          where);
                break;
            }
            rc = e->kind == E_LINK ? check_link(c, i) : check_host(c, i, pz);
            break;
        case E_ROUTE:
        case E_ZONEROUTE:
            if (pk != E_ZONE) {
                rc = fail(c, e->line, "<%s> inside %s: it belongs in a <zone>", k_kind[e->kind],
                          where);
                break;
            }
            rc = check_route(c, i, pz);
            break;
        case E_LINKCTN:
            if (pk != E_ROUTE && pk != E_ZONEROUTE) {
                rc = fail(c, e->line,
                          "<link_ctn> inside %s: it belongs in a <route> or <zoneRoute>", where);
                break;
            }
            rc = check_link_ctn(c, i);
            has_link[e->parent] = 1;
            break;
        case E_PROP: {
            if (pk != E_ZONE && pk != E_HOST && pk != E_LINK) {
                rc = fail(c, e->line,
                          "<prop> inside %s: properties belong to zones, hosts and links", where);
                break;
            }
            const char *id = need(c, e, "id"), *v = id ? need(c, e, "value") : NULL;
            if (!v) {
                rc = -1;
                break;
            }
            for (int q = (*last_prop)[e->parent]; q >= 0; q = (*prop_prev)[q])
                if (!strcmp(get(c, &c->el[q], "id"), id)) {
                    rc = fail(c, e->line, "property %.80s given twice (line %d and here)", id,
                              c->el[q].line);
                    break;
                }
            (*prop_prev)[i] = (*last_prop)[e->parent];
            (*last_prop)[e->parent] = i;
            break;
        }
        case E_NKINDS:
            break;
        }
        if (rc == 0 && e->kind != E_PLATFORM && e->parent < 0)
            rc = fail(c, e->line, "the top element is <%s>, not <platform>", k_kind[e->kind]);
    }
    for (int i = 0; i < c->nel && rc == 0; i++)
        if ((c->el[i].kind == E_ROUTE || c->el[i].kind == E_ZONEROUTE) && !has_link[i])
            rc = fail(c, c->el[i].line, "a <%s> without any <link_ctn>", k_kind[c->el[i].kind]);
    free(has_link);
    if (rc == 0 && !nroot) rc = fail(c, 0, "no <zone>: a platform needs one root zone");
    return rc;
}

/* --- GPU hosts ---------------------------------------------------------------------------- */

/* "gpu<r>" -> r (*nic 0) or "gpu<r>.nic" -> r (*nic 1); -1 for other names. */
static long gpu_index(const char *name, int *nic) {
    if (strncmp(name, "gpu", 3) != 0 || !isdigit((unsigned char)name[3])) return -1;
    const char *p = name + 3;
    if (p[0] == '0' && isdigit((unsigned char)p[1])) return -1;
    long v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        v = v * 10 + (*p - '0');
        if (v > MAX_GPUS) return MAX_GPUS + 1;
    }
    if (!*p) return *nic = 0, v;
    if (!strcmp(p, ".nic")) return *nic = 1, v;
    return -1;
}

typedef struct {
    int gpu_np, nic_np;
    long node, local; /* -1 when not given */
} gpu_t;

static const char *prop_of(const ctx *c, const int *prop_prev, const int *last_prop, int e,
                           const char *key, int *line) {
    for (int q = last_prop[e]; q >= 0; q = prop_prev[q])
        if (!strcmp(get(c, &c->el[q], "id"), key)) {
            *line = c->el[q].line;
            return get(c, &c->el[q], "value");
        }
    return NULL;
}

static int check_gpu_props(ctx *c, const int *prop_prev, const int *last_prop, int r, gpu_t *g) {
    int e = c->np[g->gpu_np].elem, line = c->el[e].line;
    static const char *const real[] = {"peak_flops", "hbm_bw", "hbm_bytes"};
    static const double hi[] = {1e20, 1e16, 1e16};
    for (int k = 0; k < 3; k++) {
        const char *v = prop_of(c, prop_prev, last_prop, e, real[k], &line);
        double x;
        char *end;
        if (!v) {
            if (k == 2) continue; /* hbm_bytes is optional */
            return fail(c, c->el[e].line, "host gpu%d needs the property %s (a positive number)", r,
                        real[k]);
        }
        errno = 0;
        x = strtod(v, &end);
        if (!isdigit((unsigned char)v[0]) || *end || errno || !(x > 0) || x > hi[k])
            return fail(c, line, "property %s=\"%.40s\" of host gpu%d: a positive number up to %g",
                        real[k], v, r, hi[k]);
    }
    static const char *const ints[] = {"sm_count", "node", "local_index", "gpus_per_node"};
    static const long lo[] = {1, 0, 0, 1}, top[] = {100000, MAX_GPUS - 1, MAX_GPUS - 1, MAX_GPUS};
    long val[4] = {-1, -1, -1, -1};
    for (int k = 0; k < 4; k++) {
        const char *v = prop_of(c, prop_prev, last_prop, e, ints[k], &line);
        if (!v) {
            if (k == 0)
                return fail(c, c->el[e].line, "host gpu%d needs the property sm_count (an integer)",
                            r);
            continue;
        }
        if (parse_int(v, lo[k], top[k], &val[k]))
            return fail(c, line, "property %s=\"%.40s\" of host gpu%d: an integer from %ld to %ld",
                        ints[k], v, r, lo[k], top[k]);
    }
    g->node = val[1];
    g->local = val[2];
    return 0;
}

/* --- routes ------------------------------------------------------------------------------- */

/* Zone z's route from member a to member b: its first and last edges. 0, -1 none, -2 no memory */
static int local_route(ctx *c, int z, int a, int b, int *first, int *last) {
    zone *zz = &c->zn[z];
    if (zz->routing == R_NONE) return -1;
    if (zz->routing == R_FULL) {
        char key[48];
        snprintf(key, sizeof key, "%d %d", a, b);
        int *e = table_find(&c->route_by_pair, key);
        if (!e) return -1;
        *first = *last = *e;
        return 0;
    }
    /* graph routing: a breadth-first search from a, the latest one kept per zone */
    if (!zz->bfs) {
        zz->bfs = calloc(2, sizeof *zz->bfs);
        if (!zz->bfs) return -2;
        zz->bfs[0] = malloc(((size_t)zz->nmem + 1) * sizeof **zz->bfs); /* reaching edge */
        zz->bfs[1] = malloc(2 * sizeof **zz->bfs);                      /* [0] source */
        if (!zz->bfs[0] || !zz->bfs[1]) return -2;
        zz->bfs[1][0] = -1;
    }
    int *via = zz->bfs[0];
    if (zz->bfs[1][0] != a) {
        int *queue = malloc(((size_t)zz->nmem + 1) * sizeof *queue);
        if (!queue) return -2;
        for (int i = 0; i < zz->nmem; i++)
            via[i] = -2;
        via[c->np[a].local] = -1;
        int head = 0, tail = 0;
        queue[tail++] = a;
        while (head < tail) {
            int u = queue[head++];
            for (int e = c->np[u].first; e >= 0; e = c->ed[e].next) {
                int v = c->ed[e].dst;
                if (via[c->np[v].local] != -2) continue;
                via[c->np[v].local] = e;
                queue[tail++] = v;
            }
        }
        free(queue);
        zz->bfs[1][0] = a;
    }
    int e = via[c->np[b].local];
    if (e < 0) return -1;
    *last = e;
    while (c->ed[e].src != a)
        e = via[c->np[c->ed[e].src].local];
    *first = e;
    return 0;
}

/* Whether SimGrid finds a route from netpoint a to netpoint b: through the zone that holds both,
 * its route between their sub-zones, and the gateways down to a and b. 1 yes, 0 no, -2 memory. */
static int reach(ctx *c, int a, int b, int depth) {
    if (a == b) return 1;
    if (depth > 2 * MAX_DEPTH + 4) return 0;
    int x = c->np[a].zone, y = c->np[b].zone, ca = a, cb = b;
    while (x != y) {
        if (x < 0 || y < 0) return 0;
        if (c->zn[x].depth >= c->zn[y].depth) {
            ca = c->zn[x].np;
            x = c->zn[x].parent;
        } else {
            cb = c->zn[y].np;
            y = c->zn[y].parent;
        }
    }
    int first, last, r = local_route(c, x, ca, cb, &first, &last);
    if (r < 0) return r == -2 ? -2 : 0;
    if (ca != a) {
        int gs = c->ed[first].gw_src;
        r = gs < 0 ? 0 : reach(c, a, gs, depth + 1);
        if (r != 1) return r;
    }
    if (cb != b) {
        int gd = c->ed[last].gw_dst;
        r = gd < 0 ? 0 : reach(c, gd, b, depth + 1);
        if (r != 1) return r;
    }
    return 1;
}

static int need_route(ctx *c, int s, int d, const char *why) {
    int r = reach(c, s, d, 0);
    if (r == -2) return fail(c, 0, "out of memory checking routes");
    if (r == 0)
        return fail(c, 0, "no route from %.80s to %.80s (%s: docs/epsim.md, \"Platform files\")",
                    id_of(c, s), id_of(c, d), why);
    return 0;
}

static int cmp_long2(const void *x, const void *y) {
    const long *a = x, *b = y;
    return a[0] != b[0] ? (a[0] > b[0]) - (a[0] < b[0]) : (a[1] > b[1]) - (a[1] < b[1]);
}

static int check_gpus(ctx *c, const int *prop_prev, const int *last_prop) {
    long n = 0;
    int nnic = 0;
    for (int i = 0; i < c->nnp; i++) {
        int nic;
        long r = c->np[i].kind == E_HOST ? gpu_index(id_of(c, i), &nic) : -1;
        if (r > MAX_GPUS - 1)
            return fail(c, c->el[c->np[i].elem].line, "host %.40s: more than %d GPUs", id_of(c, i),
                        MAX_GPUS);
        if (r >= 0 && !nic && r + 1 > n) n = r + 1;
    }
    if (n == 0) return fail(c, 0, "no GPU hosts (named gpu0, gpu1, ...)");
    gpu_t *g = malloc((size_t)n * sizeof *g);
    if (!g) return fail(c, 0, "out of memory");
    for (long r = 0; r < n; r++)
        g[r] = (gpu_t){-1, -1, -1, -1};
    int rc = 0;
    for (int i = 0; i < c->nnp && rc == 0; i++) {
        int nic;
        long r = c->np[i].kind == E_HOST ? gpu_index(id_of(c, i), &nic) : -1;
        if (r < 0) continue;
        if (nic && r >= n)
            rc = fail(c, c->el[c->np[i].elem].line, "host gpu%ld.nic has no GPU host gpu%ld", r, r);
        else if (nic)
            g[r].nic_np = i, nnic++;
        else
            g[r].gpu_np = i;
    }
    for (long r = 0; r < n && rc == 0; r++)
        if (g[r].gpu_np < 0)
            rc = fail(c, 0, "host gpu%ld is missing: GPU hosts are gpu0..gpu%ld without gaps", r,
                      n - 1);
    for (long r = 0; r < n && rc == 0; r++)
        rc = check_gpu_props(c, prop_prev, last_prop, (int)r, &g[r]);
    if (rc) return free(g), rc;
    int nics = nnic > 0;
    for (long r = 0; r < n && rc == 0; r++) {
        if (nics && g[r].nic_np < 0)
            rc = fail(c, 0, "host gpu%ld has no NIC host gpu%ld.nic (give every GPU one, or none)",
                      r, r);
        else if ((g[r].node < 0) != (g[0].node < 0) || (g[r].local < 0) != (g[0].local < 0))
            rc = fail(c, c->el[c->np[g[r].gpu_np].elem].line,
                      "hosts gpu0 and gpu%ld: give the properties node and local_index to every "
                      "GPU or to none",
                      r);
        else if (nics && (g[r].node < 0 || g[r].local < 0))
            rc = fail(c, c->el[c->np[g[r].gpu_np].elem].line,
                      "host gpu%ld needs the properties node and local_index (the platform has NIC "
                      "hosts)",
                      r);
    }
    if (rc) return free(g), rc;
    if (n > 65536 || (!nics && n > 8192)) {
        free(g);
        return fail(c, 0, "%ld GPUs: at most 65536, and 8192 without NIC hosts", n);
    }
    /* slots: no two GPUs in one (node, local_index); with NIC hosts every node complete */
    if (g[0].node >= 0 && g[0].local >= 0) {
        long *slot = malloc((size_t)n * 3 * sizeof *slot), maxn = 0, maxl = 0;
        if (!slot) return free(g), fail(c, 0, "out of memory");
        for (long r = 0; r < n; r++) {
            slot[3 * r] = g[r].node, slot[3 * r + 1] = g[r].local, slot[3 * r + 2] = r;
            if (g[r].node > maxn) maxn = g[r].node;
            if (g[r].local > maxl) maxl = g[r].local;
        }
        qsort(slot, (size_t)n, 3 * sizeof *slot, cmp_long2);
        for (long k = 1; k < n && rc == 0; k++)
            if (slot[3 * k] == slot[3 * k - 3] && slot[3 * k + 1] == slot[3 * k - 2])
                rc = fail(c, 0, "hosts gpu%ld and gpu%ld are both node %ld, local_index %ld",
                          slot[3 * k - 1], slot[3 * k + 2], slot[3 * k], slot[3 * k + 1]);
        if (rc == 0 && nics && (maxn + 1) * (maxl + 1) != n) {
            /* slots are sorted and unique: the first (node, local_index) missing */
            long k = 0, want = 0;
            while (k < n && slot[3 * k] == want / (maxl + 1) &&
                   slot[3 * k + 1] == want % (maxl + 1))
                k++, want++;
            rc =
                fail(c, 0,
                     "node %ld has no GPU of local_index %ld (with NIC hosts, every node needs all "
                     "%ld: traffic to another rail is relayed in the sender's node)",
                     want / (maxl + 1), want % (maxl + 1), maxl + 1);
        }
        free(slot);
    }
    /* routes between every two endpoints that exchange data */
    /* source by source: the search of graph zones is kept per source */
    for (long a = 0; a < n && rc == 0; a++)
        for (long b = 0; b < n && rc == 0; b++) {
            if (a == b) continue;
            if (!nics)
                rc = need_route(c, g[a].gpu_np, g[b].gpu_np, "every two GPUs exchange data");
            else if (g[a].node == g[b].node)
                rc = need_route(c, g[a].gpu_np, g[b].gpu_np,
                                "GPUs of one node exchange data over it");
            else if (g[a].local == g[b].local)
                rc = need_route(c, g[a].nic_np, g[b].nic_np,
                                "NICs of one rail exchange data between nodes");
        }
    free(g);
    return rc;
}

static int check_zone_props(ctx *c, const int *prop_prev, const int *last_prop) {
    for (int z = 0; z < c->nzone; z++) {
        int line, e = c->zn[z].elem;
        const char *v = prop_of(c, prop_prev, last_prop, e, "gpus_per_node", &line);
        long x;
        if (v && parse_int(v, 1, MAX_GPUS, &x))
            return fail(c, line, "property gpus_per_node=\"%.40s\": an integer from 1 to %d", v,
                        MAX_GPUS);
        v = prop_of(c, prop_prev, last_prop, e, "calibration", &line);
        if (v && (!*v || strlen(v) > 240))
            return fail(c, line, "property calibration: a file or a name of up to 240 characters");
    }
    return 0;
}

int sim_platform_check_text(const char *text, size_t len, const char *name, char err[EP_ERRLEN]) {
    ctx c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.err = err;
    c.p = text;
    c.end = text + len;
    c.line = 1;
    err[0] = 0;
    int *prop_prev = NULL, *last_prop = NULL;
    int rc;
    if (len > (size_t)SIM_PLATFORM_MAX_BYTES)
        rc = fail(&c, 0, "larger than %ld MiB", SIM_PLATFORM_MAX_BYTES >> 20);
    else if (len == 0)
        rc = fail(&c, 0, "the file is empty");
    else
        rc = check_bytes(&c, (const unsigned char *)text, len);
    if (rc == 0) rc = parse_xml(&c);
    if (rc == 0) rc = check_elements(&c, &prop_prev, &last_prop);
    if (rc == 0) rc = check_zone_props(&c, prop_prev, last_prop);
    if (rc == 0) rc = check_gpus(&c, prop_prev, last_prop);
    for (int i = 0; i < c.nat; i++) {
        free(c.at[i].key);
        free(c.at[i].val);
    }
    for (int z = 0; z < c.nzone; z++) {
        free(c.zn[z].mem);
        if (c.zn[z].bfs) {
            free(c.zn[z].bfs[0]);
            free(c.zn[z].bfs[1]);
            free(c.zn[z].bfs);
        }
    }
    free(c.at);
    free(c.el);
    free(c.zone_of_elem);
    free(c.np);
    free(c.zn);
    free(c.ed);
    free(prop_prev);
    free(last_prop);
    table_free(&c.np_by_name);
    table_free(&c.link_by_name);
    table_free(&c.route_by_pair);
    return rc;
}

int sim_platform_check_file(const char *path, char err[EP_ERRLEN]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, EP_ERRLEN, "platform %.300s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, EP_ERRLEN, "platform %.300s: %s", path,
                 S_ISDIR(st.st_mode) ? "a directory, not a platform file" : "not a regular file");
        fclose(f);
        return -1;
    }
    if (st.st_size > SIM_PLATFORM_MAX_BYTES) {
        snprintf(err, EP_ERRLEN, "platform %.300s: larger than %ld MiB", path,
                 SIM_PLATFORM_MAX_BYTES >> 20);
        fclose(f);
        return -1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, EP_ERRLEN, "platform %.300s: cannot read it", path);
        free(buf);
        return -1;
    }
    int rc = sim_platform_check_text(buf, got, path, err);
    free(buf);
    return rc;
}
