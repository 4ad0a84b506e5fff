/* The kernel's side of a WAL commit, alone: a commit of F frames written the way SQLite
 * writes them (each frame's 24-byte header, then its 4 KiB page: 2F pwrite calls) and
 * the way the store's VFS does (crates/sqlite-vfs: one call for the commit), 20,000
 * commits each, restarting at the file's start every ~1,000 frames as a checkpointed
 * WAL does. docs/benchmark.md, "One write per commit".
 *
 *   cc -O2 -o /tmp/wal_write_pattern benches/wal_write_pattern.c
 *   /tmp/wal_write_pattern 2 && /tmp/wal_write_pattern 6
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    int frames = argc > 1 ? atoi(argv[1]) : 2;
    if (frames < 1 || frames > 32) return 2;
    char path[] = "/tmp/wal_write_pattern.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    unlink(path);
    static char page[4096], header[24];
    memset(page, 7, sizeof page);
    const int commits = 20000;
    for (int gathered = 0; gathered < 2; gathered++) {
        for (int round = 0; round < 3; round++) {
            double start = now_us();
            long offset = 32;
            for (int c = 0; c < commits; c++) {
                if (c % (1000 / frames) == 0) offset = 32;
                if (!gathered) {
                    for (int f = 0; f < frames; f++) {
                        if (pwrite(fd, header, 24, offset) != 24) return 1;
                        if (pwrite(fd, page, 4096, offset + 24) != 4096) return 1;
                        offset += 4120;
                    }
                } else {
                    struct iovec v[64];
                    for (int f = 0; f < frames; f++) {
                        v[2 * f].iov_base = header;
                        v[2 * f].iov_len = 24;
                        v[2 * f + 1].iov_base = page;
                        v[2 * f + 1].iov_len = 4096;
                    }
                    if (pwritev(fd, v, 2 * frames, offset) != 4120 * frames) return 1;
                    offset += 4120 * frames;
                }
            }
            printf("%d frames a commit, %s: %.2f us a commit\n", frames,
                   gathered ? "one write" : "two writes a frame", (now_us() - start) / commits);
        }
    }
    close(fd);
    return 0;
}
