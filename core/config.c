/* config: defaults, command-line and argument-file parsing, and the resolved-config accessors.
 *
 * Flags are spelled as Megatron-LM spells them (table in config_flags.c). Argument files (@file)
 * hold whitespace-separated tokens with # comments; a nested @file resolves against the directory
 * of the file that names it, so presets can include each other wherever they are run from.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ep_config.h"

#define MAX_FILE_DEPTH 8
#define MAX_FILE_BYTES (1 << 20) /* argument files are small; this stops /dev/zero-like input */

void ep_config_defaults(ep_config *cfg) {
    char err[EP_ERRLEN];
    int n;
    const ep_flag *t = ep_config_flags(&n);
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < n; i++) {
        if (t[i].type == EP_FLAG_ALIAS) continue;
        /* The table's defaults are constants checked by the unit tests; cannot fail. */
        if (ep_config_set(cfg, t[i].name, t[i].def, err) != 0) abort();
    }
    for (int i = 0; i < EP_MAX_LAYERS; i++)
        cfg->moe_layer_is_moe[i] = 1;
}

/* Tokens taken from argument files must outlive the parse when they are handed back through
 * positional/pass_unknown, so they are copied into this process-lifetime arena. */
static char g_arena[1 << 16];
static size_t g_arena_used;

static const char *keep(const char *s) {
    size_t len = strlen(s) + 1;
    if (g_arena_used + len > sizeof g_arena) return NULL;
    char *p = g_arena + g_arena_used;
    memcpy(p, s, len);
    g_arena_used += len;
    return p;
}

typedef struct {
    ep_config *cfg;
    ep_arglist *positional;
    ep_arglist *pass_unknown;
    char *err;
    unsigned given; /* bits of k_backend_flags given in this parse */
} parse_ctx;

/* Flags that tune one dispatcher backend: given while another backend runs they would change
 * nothing, so that is an error (check_no_effect) rather than a silent wrong model. */
static const struct {
    const char *flag, *needs;
} k_backend_flags[] = {
    {"moe-flex-dispatcher-backend", "--moe-token-dispatcher-type flex"},
    {"moe-flex-transport", "--moe-token-dispatcher-type flex"},
    {"moe-deepep-num-sms",
     "the deepep backend (--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep)"},
    {"moe-hybridep-num-sms", "the hybridep backend (--moe-token-dispatcher-type flex "
                             "--moe-flex-dispatcher-backend hybridep)"},
    {"moe-hybridep-num-blocks-permute", "--moe-hybridep-fuse-permute"},
};

static void note_given(parse_ctx *c, const char *name) {
    for (size_t i = 0; i < sizeof k_backend_flags / sizeof k_backend_flags[0]; i++)
        if (strcmp(k_backend_flags[i].flag, name) == 0) c->given |= 1u << i;
}

static int check_no_effect(parse_ctx *c) {
    const ep_config *cfg = c->cfg;
    int flex = cfg->moe_token_dispatcher_type == EP_DISPATCHER_FLEX;
    ep_backend be = ep_config_backend(cfg);
    int effect[] = {flex, flex, be == EP_BACKEND_DEEPEP, be == EP_BACKEND_HYBRIDEP,
                    cfg->moe_hybridep_permute_fusion};
    for (size_t i = 0; i < sizeof k_backend_flags / sizeof k_backend_flags[0]; i++)
        if ((c->given & (1u << i)) && !effect[i]) {
            snprintf(c->err, EP_ERRLEN, "--%s has no effect without %s", k_backend_flags[i].flag,
                     k_backend_flags[i].needs);
            return -1;
        }
    return 0;
}

static int parse_tokens(parse_ctx *c, char **tok, int n, const char *dir, int depth);

static int push(parse_ctx *c, ep_arglist *l, const char *s, int from_file, const char *what) {
    if (l->count >= (int)(sizeof l->items / sizeof l->items[0])) {
        snprintf(c->err, EP_ERRLEN, "too many %s arguments (at %.64s)", what, s);
        return -1;
    }
    const char *p = from_file ? keep(s) : s;
    if (!p) {
        snprintf(c->err, EP_ERRLEN, "too much %s argument text (at %.64s)", what, s);
        return -1;
    }
    l->items[l->count++] = p;
    return 0;
}

/* Splits text in place into tokens; # starts a comment to the end of the line.
 * Returns the token count, or -1 when out of memory; *out is malloc'ed. */
static int tokenize(char *text, char ***out) {
    int cap = 64, n = 0;
    char **v = malloc((size_t)cap * sizeof *v);
    if (!v) return -1;
    char *p = text;
    while (*p) {
        if (*p == '#') {
            while (*p && *p != '\n')
                *p++ = ' ';
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f') {
            p++;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            char **nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) return free(v), -1;
            v = nv;
        }
        v[n++] = p;
        while (*p && *p != '#' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' &&
               *p != '\v' && *p != '\f')
            p++;
        if (*p == '#') { /* a comment glued to a token: end the token, skip the comment */
            *p++ = 0;
            while (*p && *p != '\n')
                p++;
        } else if (*p) {
            *p++ = 0;
        }
    }
    *out = v;
    return n;
}

static int parse_text_at(parse_ctx *c, char *text, const char *dir, int depth, const char *what) {
    char **tok = NULL;
    int n = tokenize(text, &tok);
    if (n < 0) {
        snprintf(c->err, EP_ERRLEN, "out of memory reading %s", what);
        return -1;
    }
    int rc = parse_tokens(c, tok, n, dir, depth);
    free(tok);
    return rc;
}

/* Reads an argument file; only regular files (a FIFO or device could block or never end). */
static char *read_file(const char *path, char *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, EP_ERRLEN, "cannot read argument file '%.200s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, EP_ERRLEN, "cannot read argument file '%.200s': not a regular file", path);
        fclose(f);
        return NULL;
    }
    if (st.st_size > MAX_FILE_BYTES) {
        snprintf(err, EP_ERRLEN, "argument file '%.200s' is larger than %d bytes", path,
                 MAX_FILE_BYTES);
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, EP_ERRLEN, "cannot read argument file '%.200s'", path);
        free(buf);
        return NULL;
    }
    buf[got] = 0;
    return buf;
}

static int parse_file(parse_ctx *c, const char *name, const char *dir, int depth) {
    if (depth >= MAX_FILE_DEPTH) {
        snprintf(c->err, EP_ERRLEN, "argument files nested deeper than %d (at @%.200s)",
                 MAX_FILE_DEPTH, name);
        return -1;
    }
    if (!*name) {
        snprintf(c->err, EP_ERRLEN, "@ needs a file name");
        return -1;
    }
    size_t plen = strlen(name) + (dir ? strlen(dir) + 1 : 0) + 1;
    char *path = malloc(plen);
    if (!path) {
        snprintf(c->err, EP_ERRLEN, "out of memory reading @%.200s", name);
        return -1;
    }
    if (dir && name[0] != '/')
        snprintf(path, plen, "%s/%s", dir, name);
    else
        snprintf(path, plen, "%s", name);
    char *text = read_file(path, c->err);
    if (!text) return free(path), -1;
    /* The directory of this file, for the files it includes. */
    char *sub = strdup(path);
    char *slash = sub ? strrchr(sub, '/') : NULL;
    if (sub && slash)
        slash == sub ? (void)(sub[1] = 0) : (void)(*slash = 0);
    else if (sub)
        strcpy(sub, ".");
    int rc = sub ? parse_text_at(c, text, sub, depth + 1, path) : -1;
    if (!sub) snprintf(c->err, EP_ERRLEN, "out of memory reading @%.200s", name);
    if (rc != 0 && !strstr(c->err, "(in ")) {
        size_t len = strlen(c->err);
        snprintf(c->err + len, EP_ERRLEN - len, " (in %.200s)", path);
    }
    free(sub);
    free(text);
    free(path);
    return rc;
}

/* Appends --name to the config's list of accepted-and-ignored flags (once each). */
static void note_ignored(ep_config *cfg, const char *name) {
    char *l = cfg->ignored_flags;
    size_t cap = sizeof cfg->ignored_flags, used = strlen(l), k = strlen(name);
    for (const char *p = strstr(l, name); p; p = strstr(p + 1, name))
        if (p >= l + 2 && p[-1] == '-' && p[-2] == '-' && (p[k] == ' ' || p[k] == 0)) return;
    if (used >= 3 && strcmp(l + used - 3, "...") == 0) return; /* full already */
    if (used + k + 4 < cap - 4)
        snprintf(l + used, cap - used, "%s--%s", used ? " " : "", name);
    else
        snprintf(l + used, cap - used, " ...");
}

static int is_flag(const char *s) {
    return s[0] == '-' && s[1] == '-' && s[2];
}

/* One more value of a flag that takes several: neither a flag nor an @file. */
static int is_word(const char *s) {
    return !is_flag(s) && s[0] != '@';
}

static int parse_tokens(parse_ctx *c, char **tok, int n, const char *dir, int depth) {
    int from_file = depth > 0;
    for (int i = 0; i < n; i++) {
        const char *t = tok[i];
        if (t[0] == '@') {
            if (parse_file(c, t + 1, dir, depth) != 0) return -1;
            continue;
        }
        if (!is_flag(t)) {
            if (!c->positional) {
                snprintf(c->err, EP_ERRLEN, "unexpected argument '%.200s'", t);
                return -1;
            }
            if (push(c, c->positional, t, from_file, "positional") != 0) return -1;
            continue;
        }
        /* --name, --name=value, --no-name */
        char name[128];
        const char *eq = strchr(t, '=');
        size_t nlen = eq ? (size_t)(eq - t - 2) : strlen(t + 2);
        if (nlen >= sizeof name) nlen = sizeof name - 1;
        memcpy(name, t + 2, nlen);
        name[nlen] = 0;
        const ep_flag *f = ep_config_find_flag(name);
        int negate = 0;
        if (!f && strncmp(name, "no-", 3) == 0 && ep_config_find_flag(name + 3)) {
            f = ep_config_find_flag(name + 3);
            if (f->type != EP_FLAG_BOOL) {
                snprintf(c->err, EP_ERRLEN, "--%s: --%s is not an on/off flag", name, f->name);
                return -1;
            }
            negate = 1;
        }
        ep_ignored_arity ignored = f ? EP_IGNORED_NOT : ep_config_ignored_flag(name);
        if (ignored != EP_IGNORED_NOT) {
            if (ignored != EP_IGNORED_BOOL && !eq) {
                if (i + 1 >= n || is_flag(tok[i + 1])) {
                    snprintf(c->err, EP_ERRLEN, "--%s needs a value", name);
                    return -1;
                }
                i++;
                while (ignored == EP_IGNORED_VALUES && i + 1 < n && is_word(tok[i + 1]))
                    i++;
            } else if (ignored == EP_IGNORED_BOOL && eq) {
                snprintf(c->err, EP_ERRLEN, "--%s takes no value", name);
                return -1;
            }
            note_ignored(c->cfg, name);
            continue;
        }
        if (!f) {
            if (!c->pass_unknown) {
                ep_config_unknown_flag(name, c->err);
                return -1;
            }
            if (push(c, c->pass_unknown, t, from_file, "unknown-flag") != 0) return -1;
            if (!eq && i + 1 < n && strncmp(tok[i + 1], "--", 2) != 0)
                if (push(c, c->pass_unknown, tok[++i], from_file, "unknown-flag") != 0) return -1;
            continue;
        }
        const char *value;
        if (f->type == EP_FLAG_BOOL) {
            if (negate && eq) {
                snprintf(c->err, EP_ERRLEN, "--%s takes no value", name);
                return -1;
            }
            value = negate ? "0" : eq ? eq + 1 : "1";
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < n && !is_flag(tok[i + 1]) && f->type == EP_FLAG_STRING && f->choices) {
            /* a word list (Megatron's nargs='*'): the words up to the next flag */
            char words[256];
            size_t used = 0;
            words[0] = 0;
            while (i + 1 < n && is_word(tok[i + 1]) && used + strlen(tok[i + 1]) + 2 < sizeof words)
                used += (size_t)snprintf(words + used, sizeof words - used, "%s%s", used ? " " : "",
                                         tok[++i]);
            if (ep_config_set(c->cfg, f->name, words, c->err) != 0) return -1;
            continue;
        } else if (i + 1 < n && !is_flag(tok[i + 1])) {
            value = tok[++i];
        } else {
            snprintf(c->err, EP_ERRLEN, "--%s needs a value", f->name);
            return -1;
        }
        if (ep_config_set(c->cfg, f->name, value, c->err) != 0) return -1;
        note_given(c, f->name);
        /* Megatron-LM's run length: one iteration is simulated (epref: --iters) */
        if (strcmp(f->name, "train-iters") == 0) note_ignored(c->cfg, f->name);
    }
    return 0;
}

int ep_config_parse(ep_config *cfg, int argc, char **argv, ep_arglist *positional,
                    ep_arglist *pass_unknown, char err[EP_ERRLEN]) {
    parse_ctx c = {cfg, positional, pass_unknown, err, 0};
    err[0] = 0;
    if (positional) positional->count = 0;
    if (pass_unknown) pass_unknown->count = 0;
    if (argc <= 1) return 0;
    if (parse_tokens(&c, argv + 1, argc - 1, NULL, 0) != 0) return -1;
    return check_no_effect(&c);
}

int ep_config_parse_text(ep_config *cfg, const char *text, char err[EP_ERRLEN]) {
    parse_ctx c = {cfg, NULL, NULL, err, 0};
    err[0] = 0;
    char *copy = strdup(text);
    if (!copy) {
        snprintf(err, EP_ERRLEN, "out of memory");
        return -1;
    }
    /* Depth 1: nested @files count from here, but relative names resolve against the cwd. */
    int rc = parse_text_at(&c, copy, NULL, 1, "argument text");
    free(copy);
    return rc == 0 ? check_no_effect(&c) : rc;
}
