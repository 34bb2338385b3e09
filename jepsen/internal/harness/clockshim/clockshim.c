/* clockshim: an LD_PRELOAD library that moves a process's wall clock.
 *
 * gettimeofday, time and clock_gettime of CLOCK_REALTIME and
 * CLOCK_REALTIME_COARSE return the real time plus an offset: the int64 of
 * nanoseconds in the file named by $LOCKSMITH_CLOCK_FILE, mapped shared, so
 * that the harness moves the clock of every process under it at once.
 * Every other clock, CLOCK_MONOTONIC above all, is the kernel's own.
 *
 * The real time comes from raw system calls (syscall(2)), never from libc's
 * clock functions: no lookup of the next symbol, no allocation, so no
 * recursion through an allocator that reads the clock (jemalloc's, which
 * libfaketime trips). Until the constructor has mapped the file, or without
 * the variable or a file of 8 bytes at least, the offset is 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h> /* struct timeval, without the nonnull of sys/time.h */
#include <time.h>
#include <unistd.h>

static const int64_t *offset_ns; /* the mapped file, or NULL */

__attribute__((constructor)) static void clockshim_init(void) {
	const char *path = getenv("LOCKSMITH_CLOCK_FILE");
	if (path == NULL)
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	void *p = MAP_FAILED; /* a shorter file would fault at the first read */
	if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(int64_t))
		p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		__atomic_store_n(&offset_ns, (const int64_t *)p, __ATOMIC_RELEASE);
}

static int64_t offset(void) {
	const int64_t *p = __atomic_load_n(&offset_ns, __ATOMIC_ACQUIRE);
	return p == NULL ? 0 : __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* shift moves a time of seconds and a fraction of them, in units of
 * 1/unit s (1e9 for a timespec, 1e6 for a timeval), by the offset. */
static void shift(time_t *sec, long *frac, long unit) {
	int64_t per = 1000000000 / unit, off = offset();
	if (off == 0)
		return;
	int64_t n = (int64_t)*sec * 1000000000 + *frac * per + off;
	int64_t s = n / 1000000000, r = n % 1000000000;
	if (r < 0) { /* round toward minus infinity, as time does */
		s--;
		r += 1000000000;
	}
	*sec = s;
	*frac = r / per;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
	long r = syscall(SYS_clock_gettime, clk, ts);
	if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE))
		shift(&ts->tv_sec, &ts->tv_nsec, 1000000000);
	return (int)r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
	long r = syscall(SYS_gettimeofday, tv, tz);
	if (r == 0 && tv != NULL)
		shift(&tv->tv_sec, &tv->tv_usec, 1000000);
	return (int)r;
}

time_t time(time_t *t) {
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return (time_t)-1;
	if (t != NULL)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
