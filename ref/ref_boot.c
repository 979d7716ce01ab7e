/* ref_boot: process launch, rank discovery and the TCP channel (see ref_boot.h). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ref_boot.h"

#define CONNECT_TIMEOUT_S 120
#define LAUNCH_GRACE_S    10.0 /* after SIGTERM, the ranks left get SIGKILL (ref_boot_launch) */

double ref_mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int env_int(const char *name, int *out) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > 1 << 20) return -1;
    *out = (int)x;
    return 1;
}

/* A listening socket on an ephemeral port of the loopback interface. */
static int listen_any(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 128) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int ref_boot_launch(int *argc, char **argv, int *exit_status) {
    int n = 0, at = -1;
    for (int i = 1; i < *argc; i++)
        if (!strcmp(argv[i], "--nproc") && i + 1 < *argc) {
            n = atoi(argv[i + 1]);
            at = i;
            break;
        }
    if (at < 0) return 0;
    for (int i = at; i + 2 <= *argc; i++) /* drop "--nproc N" */
        argv[i] = argv[i + 2];
    *argc -= 2;
    if (n < 1 || n > 1024) {
        fprintf(stderr, "epref: --nproc needs a count between 1 and 1024\n");
        *exit_status = 2;
        return 1;
    }
    int port, lfd = listen_any(&port);
    if (lfd < 0) {
        fprintf(stderr, "epref: cannot open a local port for the launcher: %s\n", strerror(errno));
        *exit_status = 1;
        return 1;
    }
    fflush(NULL);
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (!pids) {
        *exit_status = 1;
        return 1;
    }
    for (int r = 0; r < n; r++) {
        pid_t p = fork();
        if (p == 0) {
            char buf[32];
            snprintf(buf, sizeof buf, "%d", r);
            setenv("RANK", buf, 1);
            setenv("LOCAL_RANK", buf, 1);
            snprintf(buf, sizeof buf, "%d", n);
            setenv("WORLD_SIZE", buf, 1);
            setenv("LOCAL_WORLD_SIZE", buf, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(buf, sizeof buf, "%d", port);
            setenv("MASTER_PORT", buf, 1);
            if (r == 0) { /* rank 0 inherits the listening socket: no race for the port */
                snprintf(buf, sizeof buf, "%d", lfd);
                setenv("EPREF_LISTEN_FD", buf, 1);
            } else {
                close(lfd);
            }
            free(pids);
            return 0;
        }
        if (p < 0) {
            fprintf(stderr, "epref: fork: %s\n", strerror(errno));
            for (int k = 0; k < r; k++)
                kill(pids[k], SIGTERM);
            *exit_status = 1;
            return 1;
        }
        pids[r] = p;
    }
    close(lfd);
    /* The first rank to fail ends the job: the rest would wait for it forever (NCCL has no
     * timeout). They get SIGTERM, and SIGKILL after LAUNCH_GRACE_S (a rank blocked in a kernel
     * that spins on the dead peer may not get as far as dying). */
    int status_out = 0, left = n;
    double killed_at = -1; /* when SIGTERM went out; -1: not yet */
    int hard = 0;           /* SIGKILL went out */
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p == 0) {
            struct timespec nap = {0, 50 * 1000 * 1000};
            nanosleep(&nap, NULL);
            if (!hard && killed_at >= 0 && ref_mono_s() - killed_at > LAUNCH_GRACE_S) {
                for (int k = 0; k < n; k++)
                    if (pids[k] > 0) kill(pids[k], SIGKILL);
                hard = 1;
            }
            continue;
        }
        left--;
        int r = 0;
        while (r < n && pids[r] != p)
            r++;
        if (r < n) pids[r] = 0;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (code && !status_out) {
            status_out = code;
            if (WIFSIGNALED(st))
                fprintf(stderr, "epref: rank %d was killed by signal %d; stopping the other ranks\n",
                        r, WTERMSIG(st));
            else if (left > 0)
                fprintf(stderr, "epref: rank %d failed (exit status %d); stopping the other ranks\n",
                        r, code);
            for (int k = 0; k < n; k++)
                if (pids[k] > 0) kill(pids[k], SIGTERM);
            killed_at = ref_mono_s();
        }
    }
    free(pids);
    *exit_status = status_out;
    return 1;
}

static int connect_to(const char *host, int port) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    time_t t0 = time(NULL);
    for (;;) {
        if (getaddrinfo(host, ps, &hints, &res) == 0) {
            for (struct addrinfo *a = res; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
                if (fd < 0) continue;
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                    freeaddrinfo(res);
                    return fd;
                }
                close(fd);
            }
            freeaddrinfo(res);
            res = NULL;
        }
        if (time(NULL) - t0 > CONNECT_TIMEOUT_S) return -1;
        struct timespec ts = {0, 100 * 1000 * 1000}; /* rank 0 may not listen yet */
        nanosleep(&ts, NULL);
    }
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1024)) {
        close(fd);
        return -1;
    }
    return fd;
}

int ref_boot_peek(int *rank, int *size, char *err, size_t len) {
    static const char *sets[3][2] = {{"RANK", "WORLD_SIZE"},
                                     {"SLURM_PROCID", "SLURM_NTASKS"},
                                     {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}};
    *rank = 0;
    *size = 1;
    for (int s = 0; s < 3; s++) {
        int r = 0, n = 0;
        int a = env_int(sets[s][0], &r), b = env_int(sets[s][1], &n);
        if (a < 0 || b < 0) {
            snprintf(err, len, "%s/%s must be non-negative integers", sets[s][0], sets[s][1]);
            return -1;
        }
        if (a == 1 && b == 1) {
            if (n < 1 || r >= n) {
                snprintf(err, len, "%s=%d is not below %s=%d", sets[s][0], r, sets[s][1], n);
                return -1;
            }
            *rank = r;
            *size = n;
            return 0;
        }
    }
    return 0;
}

int ref_boot_init(ref_world *w) {
    memset(w, 0, sizeof *w);
    static const char *sets[3][3] = {
        {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}};
    w->size = 1;
    for (int s = 0; s < 3; s++) {
        int r = 0, n = 0, l = 0;
        int a = env_int(sets[s][0], &r), b = env_int(sets[s][1], &n);
        if (a < 0 || b < 0 || env_int(sets[s][2], &l) < 0) {
            fprintf(stderr, "epref: %s/%s/%s must be non-negative integers\n", sets[s][0],
                    sets[s][1], sets[s][2]);
            return -1;
        }
        if (a == 1 && b == 1) {
            if (n < 1 || r >= n) {
                fprintf(stderr, "epref: %s=%d is not below %s=%d\n", sets[s][0], r, sets[s][1], n);
                return -1;
            }
            w->rank = r;
            w->size = n;
            w->local_rank = l;
            break;
        }
    }
    w->fds = calloc((size_t)w->size, sizeof *w->fds);
    if (!w->fds) return -1;
    if (w->size == 1) return 0;
    const char *addr = getenv("MASTER_ADDR");
    int port = 29500;
    if (env_int("MASTER_PORT", &port) < 0 || port < 1 || port > 65535) {
        fprintf(stderr, "epref: MASTER_PORT must be a port number\n");
        return -1;
    }
    if (!addr || !*addr) {
        fprintf(stderr, "epref: %d ranks need MASTER_ADDR (the host of rank 0)\n", w->size);
        return -1;
    }
    if (w->rank == 0) {
        int lfd, inherited;
        if (env_int("EPREF_LISTEN_FD", &inherited) == 1)
            lfd = inherited;
        else
            lfd = listen_on(port);
        if (lfd < 0) {
            fprintf(stderr, "epref: rank 0 cannot listen on port %d: %s\n", port, strerror(errno));
            return -1;
        }
        for (int k = 1; k < w->size; k++) {
            int fd = accept(lfd, NULL, NULL), r = -1;
            if (fd < 0 || read_all(fd, &r, sizeof r) || r < 1 || r >= w->size || w->fds[r]) {
                fprintf(stderr, "epref: rank 0: bad connection from a peer (rank %d)\n", r);
                close(lfd);
                return -1;
            }
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            w->fds[r] = fd;
        }
        close(lfd);
    } else {
        int fd = connect_to(addr, port);
        if (fd < 0) {
            fprintf(stderr, "epref: rank %d: cannot reach rank 0 at %s:%d within %d s\n", w->rank,
                    addr, port, CONNECT_TIMEOUT_S);
            return -1;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (write_all(fd, &w->rank, sizeof w->rank)) return -1;
        w->fds[0] = fd;
    }
    return ref_boot_barrier(w);
}

void ref_boot_fini(ref_world *w) {
    if (w->fds)
        for (int r = 0; r < w->size; r++)
            if (w->fds[r] > 0) close(w->fds[r]);
    free(w->fds);
    w->fds = NULL;
}

int ref_boot_allgather(ref_world *w, const void *mine, void *all, size_t bytes) {
    char *out = all;
    memmove(out + (size_t)w->rank * bytes, mine, bytes);
    if (w->size == 1) return 0;
    int r = 0; /* the peer whose connection broke */
    if (w->rank == 0) {
        for (r = 1; r < w->size; r++)
            if (read_all(w->fds[r], out + (size_t)r * bytes, bytes)) goto lost;
        for (r = 1; r < w->size; r++)
            if (write_all(w->fds[r], out, bytes * (size_t)w->size)) goto lost;
        return 0;
    }
    if (write_all(w->fds[0], mine, bytes) || read_all(w->fds[0], out, bytes * (size_t)w->size))
        goto lost;
    return 0;
lost:
    fprintf(stderr, "epref: rank %d: lost the bootstrap connection to rank %d (it died or exited)\n",
            w->rank, r);
    return -1;
}

int ref_boot_bcast(ref_world *w, void *buf, size_t bytes) {
    if (w->size == 1) return 0;
    if (w->rank == 0) {
        for (int r = 1; r < w->size; r++)
            if (write_all(w->fds[r], buf, bytes)) return -1;
        return 0;
    }
    return read_all(w->fds[0], buf, bytes);
}

int ref_boot_barrier(ref_world *w) {
    char one = 1, *all = malloc((size_t)w->size);
    if (!all) return -1;
    int rc = ref_boot_allgather(w, &one, all, 1);
    free(all);
    return rc;
}
