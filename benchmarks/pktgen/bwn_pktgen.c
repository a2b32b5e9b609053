/*
 * bwn_pktgen: the traffic generator of benchmarks/switch_pps.py, in C.
 *
 * What it does. It sends Ethernet frames, read from a template file, into one
 * interface (--tx) through an AF_PACKET socket with sendmmsg, and counts the IPv4
 * frames that come out of another (--rx), either through an AF_PACKET socket with
 * recvmmsg or from the interface's receive counter (/proc/net/dev). Frame i is the
 * template's frame i mod (number of frames), so the traffic is exactly the one the
 * Python generator of switch_pps.py sends from the same frames. Two modes, the same
 * as the Python generator's:
 *
 *   closed  keep --inflight frames inside the device under test: send whenever fewer
 *           than that many have come out; when nothing comes out for 0.2 s, what is
 *           in flight counts as lost (the rate is the device's, never an overload);
 *   open    send at --rate frames/s (0: as fast as sendmmsg goes) whatever comes out;
 *           what the device does not take is lost.
 *
 * It runs for --seconds, or until it has sent --count frames (then it waits for
 * them to come out). At the end it prints one JSON line on stdout: frames sent,
 * received and lost, the measured time, and its own user and system CPU time over
 * the measurement (getrusage). --netns NAME runs it in /run/netns/NAME (both
 * interfaces must be there); --cpu N pins it to CPU N; --warmup S runs the same
 * mode for S seconds first; --wait-go prints "ready" after setup and warm-up and
 * waits for a line on stdin, so that a caller can read its own counters at the
 * moment the measurement starts.
 *
 * Template file: one frame per line, as hexadecimal digits (two per byte); empty
 * lines and lines starting with '#' are ignored. switch_pps.py writes it
 * (--write-template).
 *
 * Limits. It is a kernel socket generator, not a kernel-bypass one: every frame is
 * an sk_buff allocated and copied from user space by the sending call, about a
 * microsecond of CPU per 1000-byte frame, so on one CPU it sends on the order of a
 * million frames per second at best. The receiving socket costs the generator
 * CPU too (its filter keeps only the first 64 bytes of each IPv4 frame); the
 * counter mode does not, but cannot tell the frames apart from other traffic on
 * the interface, and does not work in closed mode (which needs every arrival).
 * The open mode's pacing is by batches (at most --batch frames at once; below the
 * timer's resolution the frames go in bursts). The sending socket blocks when its
 * send buffer is full, which throttles an "open" sender that outruns the device's
 * input queue on another CPU. Root (or CAP_NET_RAW, and CAP_SYS_ADMIN for
 * --netns) is needed.
 *
 * Build: make pktgen (gcc -O2; the binary is build/bwn_pktgen). Exit status: 0 on
 * success, 2 on a usage or template error, 1 on a system error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MIN_FRAME 14u            /* an Ethernet header */
#define MAX_FRAME 9216u          /* a jumbo frame */
#define MAX_FRAMES 65536u        /* frames in a template */
#define SNAP_BYTES 64u           /* what the receiving socket keeps of a frame */
#define RX_TIMEOUT_US 200000     /* closed mode: nothing for this long = in flight lost */
#define EXIT_USAGE 2
#define EXIT_SYSTEM 1

enum mode { MODE_CLOSED, MODE_OPEN };
enum rx_count { RX_SOCKET, RX_COUNTER, RX_NONE };

struct options {
    const char *template_path;
    const char *tx_if;
    const char *rx_if;
    const char *netns;
    enum mode mode;
    enum rx_count rx_count;
    bool rx_count_given;
    double seconds;
    uint64_t count;              /* 0: run for --seconds */
    double rate;                 /* open mode, frames/s; 0: as fast as it goes */
    unsigned inflight;
    unsigned batch;
    int cpu;                     /* -1: not pinned */
    double warmup;
    bool wait_go;
    bool qdisc_bypass;
};

struct template {
    uint8_t **frames;
    size_t *lens;
    size_t n;
};

struct sender {
    int fd;
    struct mmsghdr *msgs;        /* n + batch entries: msgs[k] is frame k mod n */
    struct iovec *iov;
    size_t nframes;
    unsigned batch;
    uint64_t errors;             /* calls that failed with a transient error */
};

struct receiver {
    enum rx_count how;
    int fd;                      /* RX_SOCKET */
    struct mmsghdr *msgs;
    struct iovec *iov;
    uint8_t *bufs;
    unsigned batch;
    int net_dev_fd;              /* RX_COUNTER: /proc/thread-self/net/dev */
    char ifname[IF_NAMESIZE];
    uint64_t counter0;
};

struct result {
    uint64_t sent;
    uint64_t received;
    uint64_t lost;
    double elapsed_s;
};

static const char *prog = "bwn_pktgen";

static void die(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL)
        die(EXIT_SYSTEM, "out of memory");
    return p;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: %s --template FILE --tx IFACE [--rx IFACE] [options]\n"
        "\n"
        "Send the template's frames into --tx (frame i = template frame i mod n) and count\n"
        "the IPv4 frames that come out of --rx; print one JSON line with the result.\n"
        "\n"
        "  --template FILE   frames, one per line in hex ('#' comments); switch_pps.py writes it\n"
        "  --tx IFACE        interface to send into\n"
        "  --rx IFACE        interface whose arrivals are counted (needed unless --rx-count none)\n"
        "  --netns NAME      run in network namespace /run/netns/NAME\n"
        "  --mode closed|open  closed: keep --inflight frames in flight (default);\n"
        "                    open: send at --rate whatever comes out\n"
        "  --seconds S       measure for S seconds (default 5)\n"
        "  --count N         instead: send exactly N frames, then wait for them to come out\n"
        "  --rate PPS        open mode: frames per second, 0 = as fast as it goes (default 0)\n"
        "  --inflight N      closed mode: frames kept in flight (default 32)\n"
        "  --batch N         frames per sendmmsg/recvmmsg call (default 32)\n"
        "  --rx-count socket|counter|none  how arrivals are counted: an AF_PACKET socket\n"
        "                    (default in closed mode, which needs it), --rx's receive\n"
        "                    counter in /proc/net/dev (default in open mode), or not at all\n"
        "  --cpu N           pin this process to CPU N\n"
        "  --warmup S        run the same mode for S seconds before measuring (default 0)\n"
        "  --wait-go         after setup and warm-up print \"ready\" and wait for a line on stdin\n"
        "  --qdisc-bypass    send with PACKET_QDISC_BYPASS (skip --tx's queueing discipline)\n"
        "  -h, --help        this text\n"
        "\n"
        "Output: {\"mode\", \"sent\", \"received\", \"lost\", \"elapsed_s\", \"pps\", \"user_s\",\n"
        "\"sys_s\", \"send_errors\"}; pps is received / elapsed_s. Exit status 2: usage or\n"
        "template error; 1: system error (e.g. not root, no such interface).\n",
        prog);
}

/* ------------------------------------------------------------------ parsing */
static double parse_double(const char *opt, const char *s, double min)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min))
        die(EXIT_USAGE, "%s: expected a number >= %g, got '%s'", opt, min, s);
    return v;
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
    char *end = NULL;
    errno = 0;
    if (s[0] == '-')
        die(EXIT_USAGE, "%s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'", opt, min, max, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        die(EXIT_USAGE, "%s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'", opt, min, max, s);
    return (uint64_t)v;
}

static struct options parse_options(int argc, char **argv)
{
    enum { O_TEMPLATE = 256, O_TX, O_RX, O_NETNS, O_MODE, O_SECONDS, O_COUNT, O_RATE, O_INFLIGHT,
           O_BATCH, O_RXCOUNT, O_CPU, O_WARMUP, O_WAITGO, O_BYPASS };
    static const struct option longopts[] = {
        {"template", required_argument, NULL, O_TEMPLATE}, {"tx", required_argument, NULL, O_TX},
        {"rx", required_argument, NULL, O_RX}, {"netns", required_argument, NULL, O_NETNS},
        {"mode", required_argument, NULL, O_MODE}, {"seconds", required_argument, NULL, O_SECONDS},
        {"count", required_argument, NULL, O_COUNT}, {"rate", required_argument, NULL, O_RATE},
        {"inflight", required_argument, NULL, O_INFLIGHT}, {"batch", required_argument, NULL, O_BATCH},
        {"rx-count", required_argument, NULL, O_RXCOUNT}, {"cpu", required_argument, NULL, O_CPU},
        {"warmup", required_argument, NULL, O_WARMUP}, {"wait-go", no_argument, NULL, O_WAITGO},
        {"qdisc-bypass", no_argument, NULL, O_BYPASS}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct options o = {.mode = MODE_CLOSED, .seconds = 5.0, .inflight = 32, .batch = 32, .cpu = -1};
    bool seconds_given = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_TEMPLATE: o.template_path = optarg; break;
        case O_TX: o.tx_if = optarg; break;
        case O_RX: o.rx_if = optarg; break;
        case O_NETNS: o.netns = optarg; break;
        case O_MODE:
            if (strcmp(optarg, "closed") == 0) o.mode = MODE_CLOSED;
            else if (strcmp(optarg, "open") == 0) o.mode = MODE_OPEN;
            else die(EXIT_USAGE, "--mode: expected closed or open, got '%s'", optarg);
            break;
        case O_SECONDS: o.seconds = parse_double("--seconds", optarg, 0.0); seconds_given = true; break;
        case O_COUNT: o.count = parse_u64("--count", optarg, 1, UINT64_MAX / 2); break;
        case O_RATE: o.rate = parse_double("--rate", optarg, 0.0); break;
        case O_INFLIGHT: o.inflight = (unsigned)parse_u64("--inflight", optarg, 1, 1u << 20); break;
        case O_BATCH: o.batch = (unsigned)parse_u64("--batch", optarg, 1, 1024); break;
        case O_RXCOUNT:
            if (strcmp(optarg, "socket") == 0) o.rx_count = RX_SOCKET;
            else if (strcmp(optarg, "counter") == 0) o.rx_count = RX_COUNTER;
            else if (strcmp(optarg, "none") == 0) o.rx_count = RX_NONE;
            else die(EXIT_USAGE, "--rx-count: expected socket, counter or none, got '%s'", optarg);
            o.rx_count_given = true;
            break;
        case O_CPU: o.cpu = (int)parse_u64("--cpu", optarg, 0, CPU_SETSIZE - 1); break;
        case O_WARMUP: o.warmup = parse_double("--warmup", optarg, 0.0); break;
        case O_WAITGO: o.wait_go = true; break;
        case O_BYPASS: o.qdisc_bypass = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(EXIT_USAGE);
        }
    }
    if (optind < argc)
        die(EXIT_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
    if (o.template_path == NULL || o.tx_if == NULL)
        die(EXIT_USAGE, "--template and --tx are required (see --help)");
    if (!o.rx_count_given)
        o.rx_count = o.mode == MODE_CLOSED ? RX_SOCKET : RX_COUNTER;
    if (o.mode == MODE_CLOSED && o.rx_count != RX_SOCKET)
        die(EXIT_USAGE, "--mode closed needs --rx-count socket (it must see every arrival)");
    if (o.rx_count != RX_NONE && o.rx_if == NULL)
        die(EXIT_USAGE, "--rx IFACE is required unless --rx-count none");
    if (o.count > 0 && seconds_given)
        die(EXIT_USAGE, "--count and --seconds exclude each other");
    if (o.count == 0 && o.seconds <= 0.0)
        die(EXIT_USAGE, "--seconds must be > 0");
    if (o.rate > 0.0 && o.mode != MODE_OPEN)
        die(EXIT_USAGE, "--rate applies to --mode open only");
    return o;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static struct template load_template(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die(EXIT_USAGE, "template %s: %s", path, strerror(errno));
    struct template t = {.frames = xcalloc(MAX_FRAMES, sizeof(uint8_t *)),
                         .lens = xcalloc(MAX_FRAMES, sizeof(size_t)), .n = 0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    unsigned lineno = 0;
    while ((got = getline(&line, &cap, f)) != -1) {
        lineno++;
        size_t len = (size_t)got;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                           line[len - 1] == '\t'))
            len--;
        size_t start = 0;
        while (start < len && (line[start] == ' ' || line[start] == '\t'))
            start++;
        if (start == len || line[start] == '#')
            continue;
        size_t digits = len - start;
        if (digits % 2 != 0)
            die(EXIT_USAGE, "template %s line %u: an odd number of hex digits (%zu)", path, lineno, digits);
        size_t bytes = digits / 2;
        if (bytes < MIN_FRAME || bytes > MAX_FRAME)
            die(EXIT_USAGE, "template %s line %u: a frame of %zu bytes (%u..%u allowed)", path, lineno, bytes,
                MIN_FRAME, MAX_FRAME);
        if (t.n == MAX_FRAMES)
            die(EXIT_USAGE, "template %s: more than %u frames", path, MAX_FRAMES);
        uint8_t *frame = xcalloc(bytes, 1);
        for (size_t i = 0; i < bytes; i++) {
            int hi = hex_value(line[start + 2 * i]), lo = hex_value(line[start + 2 * i + 1]);
            if (hi < 0 || lo < 0)
                die(EXIT_USAGE, "template %s line %u: '%c%c' is not a hex byte (column %zu)", path, lineno,
                    line[start + 2 * i], line[start + 2 * i + 1], start + 2 * i + 1);
            frame[i] = (uint8_t)(hi << 4 | lo);
        }
        t.frames[t.n] = frame;
        t.lens[t.n] = bytes;
        t.n++;
    }
    if (ferror(f))
        die(EXIT_SYSTEM, "template %s: read error", path);
    free(line);
    fclose(f);
    if (t.n == 0)
        die(EXIT_USAGE, "template %s: no frames", path);
    return t;
}

/* ------------------------------------------------------------------ time, CPU */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void cpu_times(double *user_s, double *sys_s)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    *sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* ------------------------------------------------------------------ setup */
static void enter_netns(const char *name)
{
    char path[PATH_MAX];
    if (strchr(name, '/') != NULL || snprintf(path, sizeof path, "/run/netns/%s", name) >= (int)sizeof path)
        die(EXIT_USAGE, "--netns: '%s' is not a namespace name", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die(EXIT_SYSTEM, "--netns %s: %s: %s", name, path, strerror(errno));
    if (setns(fd, CLONE_NEWNET) != 0)
        die(EXIT_SYSTEM, "--netns %s: setns: %s (needs root)", name, strerror(errno));
    close(fd);
}

static void pin_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die(EXIT_SYSTEM, "--cpu %d: sched_setaffinity: %s", cpu, strerror(errno));
}

static unsigned iface_index(const char *name)
{
    unsigned idx = if_nametoindex(name);
    if (idx == 0)
        die(EXIT_SYSTEM, "no interface '%s' in this network namespace", name);
    return idx;
}

static int packet_socket(const char *ifname, uint16_t protocol)
{
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(protocol));
    if (fd < 0)
        die(EXIT_SYSTEM, "AF_PACKET socket: %s (needs root or CAP_NET_RAW)", strerror(errno));
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(protocol),
                              .sll_ifindex = (int)iface_index(ifname)};
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0)
        die(EXIT_SYSTEM, "bind to %s: %s", ifname, strerror(errno));
    return fd;
}

static struct sender make_sender(const struct options *o, const struct template *t)
{
    struct sender s = {.fd = packet_socket(o->tx_if, 0), .nframes = t->n, .batch = o->batch};
    if (o->qdisc_bypass) {
        int one = 1;
        if (setsockopt(s.fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) != 0)
            die(EXIT_SYSTEM, "PACKET_QDISC_BYPASS: %s", strerror(errno));
    }
    size_t n = t->n + o->batch;
    s.msgs = xcalloc(n, sizeof *s.msgs);
    s.iov = xcalloc(n, sizeof *s.iov);
    for (size_t k = 0; k < n; k++) {
        s.iov[k].iov_base = t->frames[k % t->n];
        s.iov[k].iov_len = t->lens[k % t->n];
        s.msgs[k].msg_hdr.msg_iov = &s.iov[k];
        s.msgs[k].msg_hdr.msg_iovlen = 1;
    }
    return s;
}

/* Frames `sent` .. `sent` + n - 1 of the cycle; returns how many the kernel took. */
static unsigned send_frames(struct sender *s, uint64_t sent, unsigned n)
{
    int r = sendmmsg(s->fd, &s->msgs[sent % s->nframes], n, 0);
    if (r >= 0)
        return (unsigned)r;
    if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
        s->errors++;
        return 0;
    }
    die(EXIT_SYSTEM, "sendmmsg: %s", strerror(errno));
}

static uint64_t read_counter(struct receiver *r)
{
    char buf[1 << 16];
    ssize_t n = pread(r->net_dev_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        die(EXIT_SYSTEM, "/proc/net/dev: %s", n < 0 ? strerror(errno) : "empty");
    buf[n] = '\0';
    size_t want = strlen(r->ifname);
    for (char *line = buf; line != NULL && *line != '\0';) {
        char *next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        while (*line == ' ')
            line++;
        if (strncmp(line, r->ifname, want) == 0 && line[want] == ':') {
            unsigned long long bytes = 0, packets = 0;
            if (sscanf(line + want + 1, "%llu %llu", &bytes, &packets) != 2)
                die(EXIT_SYSTEM, "/proc/net/dev: cannot read the line of %s", r->ifname);
            return (uint64_t)packets;
        }
        line = next;
    }
    die(EXIT_SYSTEM, "/proc/net/dev: no line for %s", r->ifname);
}

static struct receiver make_receiver(const struct options *o)
{
    struct receiver r = {.how = o->rx_count, .fd = -1, .net_dev_fd = -1, .batch = o->batch};
    if (o->rx_count == RX_NONE)
        return r;
    (void)iface_index(o->rx_if);
    snprintf(r.ifname, sizeof r.ifname, "%s", o->rx_if);
    if (o->rx_count == RX_COUNTER) {
        r.net_dev_fd = open("/proc/thread-self/net/dev", O_RDONLY | O_CLOEXEC);
        if (r.net_dev_fd < 0)
            die(EXIT_SYSTEM, "/proc/thread-self/net/dev: %s", strerror(errno));
        r.counter0 = read_counter(&r);
        return r;
    }
    r.fd = packet_socket(o->rx_if, ETH_P_ALL);
    /* Keep IPv4 frames of at least 34 bytes (Ethernet + IPv4 header), their first
     * SNAP_BYTES only; drop the rest in the kernel. */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 34, 0, 3),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SNAP_BYTES),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog fprog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (setsockopt(r.fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) != 0)
        die(EXIT_SYSTEM, "SO_ATTACH_FILTER: %s", strerror(errno));
    int one = 1;
    if (setsockopt(r.fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0)
        die(EXIT_SYSTEM, "PACKET_IGNORE_OUTGOING: %s", strerror(errno));
    int rcvbuf = 4 << 20;
    if (setsockopt(r.fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0 &&
        setsockopt(r.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0)
        die(EXIT_SYSTEM, "SO_RCVBUF: %s", strerror(errno));
    struct timeval tv = {.tv_sec = 0, .tv_usec = RX_TIMEOUT_US};
    if (setsockopt(r.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        die(EXIT_SYSTEM, "SO_RCVTIMEO: %s", strerror(errno));
    r.msgs = xcalloc(r.batch, sizeof *r.msgs);
    r.iov = xcalloc(r.batch, sizeof *r.iov);
    r.bufs = xcalloc(r.batch, SNAP_BYTES);
    for (unsigned i = 0; i < r.batch; i++) {
        r.iov[i].iov_base = r.bufs + (size_t)i * SNAP_BYTES;
        r.iov[i].iov_len = SNAP_BYTES;
        r.msgs[i].msg_hdr.msg_iov = &r.iov[i];
        r.msgs[i].msg_hdr.msg_iovlen = 1;
    }
    /* Nothing that arrived before the socket's filter was attached is counted. */
    while (recvmmsg(r.fd, r.msgs, r.batch, MSG_DONTWAIT, NULL) > 0) {
    }
    return r;
}

/* IPv4 frames received in one call (socket): blocking until at least one came, or
 * not (`wait` false); -1 when none came (within the 0.2 s timeout, if waiting). */
static int receive(struct receiver *r, bool wait)
{
    int n = recvmmsg(r->fd, r->msgs, r->batch, wait ? MSG_WAITFORONE : MSG_DONTWAIT, NULL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return -1;
        die(EXIT_SYSTEM, "recvmmsg: %s", strerror(errno));
    }
    int ipv4 = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *b = r->bufs + (size_t)i * SNAP_BYTES;
        ipv4 += r->msgs[i].msg_len >= 14 && b[12] == 0x08 && b[13] == 0x00;
    }
    return ipv4;
}

/* Arrivals so far since the receiver was made or last reset (counter). */
static uint64_t counter_arrivals(struct receiver *r)
{
    return read_counter(r) - r->counter0;
}

/* Discard what is still arriving: until nothing came for 0.3 s. */
static void drain(struct receiver *r)
{
    if (r->how == RX_SOCKET) {
        double quiet_since = now_s();
        while (now_s() - quiet_since < 0.3) {
            if (receive(r, true) > 0)
                quiet_since = now_s();
        }
    } else if (r->how == RX_COUNTER) {
        uint64_t last = read_counter(r);
        for (;;) {
            sleep_until(now_s() + 0.3);
            uint64_t c = read_counter(r);
            if (c == last)
                break;
            last = c;
        }
        r->counter0 = last;
    }
}

/* ------------------------------------------------------------------ the two modes */
static struct result closed_loop(struct sender *s, struct receiver *r, double seconds, uint64_t count,
                                 unsigned inflight)
{
    uint64_t sent = 0, got = 0, lost = 0;
    double t0 = now_s(), end = count > 0 ? 1e300 : t0 + seconds;
    while (now_s() < end) {
        if (count > 0 && got + lost >= count)
            break;
        /* More arrivals than frames sent (other IPv4 traffic on --rx) count as none in flight. */
        uint64_t busy = sent > got + lost ? sent - got - lost : 0;
        if (busy < inflight) {
            uint64_t room = inflight - busy;
            if (count > 0 && room > count - sent)
                room = count - sent;
            if (room > s->batch)
                room = s->batch;
            if (room > 0)
                sent += send_frames(s, sent, (unsigned)room);
        }
        int n = receive(r, true);
        if (n < 0) {                        /* nothing for 0.2 s: what is in flight is gone */
            lost = sent > got ? sent - got : 0;
            continue;
        }
        got += (uint64_t)n;
        if (got + lost > sent)              /* a frame counted lost came out after all */
            lost = sent > got ? sent - got : 0;
    }
    return (struct result){.sent = sent, .received = got, .lost = lost, .elapsed_s = now_s() - t0};
}

static struct result open_loop(struct sender *s, struct receiver *r, double seconds, uint64_t count, double rate)
{
    uint64_t sent = 0, got = 0;
    double t0 = now_s(), end = t0 + seconds;
    for (;;) {
        double t = now_s();
        if (count > 0 ? sent >= count : t >= end)
            break;
        uint64_t n = s->batch;
        if (count > 0 && n > count - sent)
            n = count - sent;
        if (rate > 0.0) {
            double due = (t - t0) * rate + 1.0;    /* frames due by now; the first at once */
            if ((double)sent >= due - 1e-9) {
                double next = t0 + (double)sent / rate;
                sleep_until(count > 0 || next < end ? next : end);
                continue;
            }
            if ((double)n > due - (double)sent)
                n = (uint64_t)(due - (double)sent);
            if (n == 0)
                n = 1;
        }
        sent += send_frames(s, sent, (unsigned)n);
        if (r->how == RX_SOCKET) {
            int k;
            while ((k = receive(r, false)) > 0)
                got += (uint64_t)k;
        }
    }
    double elapsed = now_s() - t0;
    /* What is still inside the device comes out. */
    if (r->how == RX_SOCKET) {
        while (got < sent) {
            int k = receive(r, true);
            if (k < 0)
                break;
            got += (uint64_t)k;
        }
    } else if (r->how == RX_COUNTER) {
        uint64_t last = counter_arrivals(r);
        double quiet_since = now_s();
        while (last < sent && now_s() - quiet_since < 0.5) {
            sleep_until(now_s() + 0.02);
            uint64_t c = counter_arrivals(r);
            if (c != last) {
                last = c;
                quiet_since = now_s();
            }
        }
        got = last;
    }
    return (struct result){.sent = sent, .received = got, .lost = sent > got ? sent - got : 0,
                           .elapsed_s = elapsed};
}

static struct result run_mode(const struct options *o, struct sender *s, struct receiver *r, double seconds,
                              uint64_t count)
{
    if (o->mode == MODE_CLOSED)
        return closed_loop(s, r, seconds, count, o->inflight);
    return open_loop(s, r, seconds, count, o->rate);
}

int main(int argc, char **argv)
{
    struct options o = parse_options(argc, argv);
    struct template t = load_template(o.template_path);
    if (o.netns != NULL)
        enter_netns(o.netns);
    if (o.cpu >= 0)
        pin_cpu(o.cpu);
    struct sender s = make_sender(&o, &t);
    struct receiver r = make_receiver(&o);

    if (o.warmup > 0.0) {
        (void)run_mode(&o, &s, &r, o.warmup, 0);
        drain(&r);
    }
    if (o.wait_go) {
        printf("ready\n");
        fflush(stdout);
        char line[64];
        if (fgets(line, sizeof line, stdin) == NULL)
            die(EXIT_SYSTEM, "--wait-go: stdin closed before the go line");
    }
    if (r.how == RX_COUNTER)
        r.counter0 = read_counter(&r);
    uint64_t errors0 = s.errors;
    double user0, sys0, user1, sys1;
    cpu_times(&user0, &sys0);
    struct result res = run_mode(&o, &s, &r, o.seconds, o.count);
    cpu_times(&user1, &sys1);
    printf("{\"mode\": \"%s\", \"sent\": %" PRIu64 ", \"received\": %" PRIu64 ", \"lost\": %" PRIu64
           ", \"elapsed_s\": %.6f, \"pps\": %.1f, \"user_s\": %.6f, \"sys_s\": %.6f, \"send_errors\": %" PRIu64
           ", \"rx_count\": \"%s\"}\n",
           o.mode == MODE_CLOSED ? "closed" : "open", res.sent, res.received, res.lost, res.elapsed_s,
           res.elapsed_s > 0.0 ? (double)res.received / res.elapsed_s : 0.0, user1 - user0, sys1 - sys0,
           s.errors - errors0, r.how == RX_SOCKET ? "socket" : r.how == RX_COUNTER ? "counter" : "none");
    fflush(stdout);
    return 0;
}
