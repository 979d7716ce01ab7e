/* sim_child: work done in a child process, its result copied back (sim_child.h). */
#include "sim_child.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int sim_child_call(int (*fn)(void *ctx, void *out), void *ctx, void *out, size_t n) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) { /* out is the child's own copy here */
        close(fd[0]);
        int ok = fn(ctx, out) == 0;
        for (size_t sent = 0; ok && sent < n;) {
            ssize_t k = write(fd[1], (const char *)out + sent, n - sent);
            ok = k > 0;
            sent += ok ? (size_t)k : 0;
        }
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    char *buf = malloc(n ? n : 1);
    size_t got = 0;
    while (buf && got < n) {
        ssize_t k = read(fd[0], buf + got, n - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = buf && got == n && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) memcpy(out, buf, n);
    free(buf);
    return ok ? 0 : -1;
}
