/*
 * fi_dpdk_doctor: says whether the dpdk provider works here with the
 * current FI_DPDK_* settings, and if not, why and what to do.
 *
 * It looks at what the provider depends on (privileges, hugepages, the
 * interface or memif socket the settings name), then opens the provider the
 * way every application does (fi_getinfo, fi_fabric, fi_domain, an RDM
 * endpoint with its AV and CQ, fi_enable) and reports each step. The
 * provider's own explanations (its warnings) are caught and shown as the
 * problems they are, and its account of the device it chose (device, address,
 * MTU) as the chosen path.
 *
 * Exit status: 0 the provider works (possibly with warnings, e.g. only
 * between processes of this host), 1 it would not work, 2 usage.
 *
 * Written in C against the public API only: what it sees is what an
 * application sees.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

extern char** environ;

static int failures; /* problems that stop the provider */
static int warnings; /* problems it works around */

static void say(const char* tag, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  %-5s ", tag);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    if (strcmp(tag, "FAIL") == 0)
        failures++;
    else if (strcmp(tag, "WARN") == 0)
        warnings++;
}

static const char* env_or(const char* name, const char* fallback)
{
    const char* v = getenv(name);
    return v && *v ? v : fallback;
}

/* ------------------------------------------------------------ privileges */

/* CAP_NET_RAW (bit 13) in the effective set: af_packet and af_xdp need it. */
static int has_cap_net_raw(void)
{
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long caps = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "CapEff: %llx", &caps) == 1)
            break;
    fclose(f);
    return (caps >> 13) & 1;
}

static long meminfo(const char* key)
{
    FILE* f = fopen("/proc/meminfo", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static void check_privileges(const char* device)
{
    const int raw = has_cap_net_raw();
    const int needs_raw =
        !*device || strncmp(device, "net_af_packet", 13) == 0 || strncmp(device, "net_af_xdp", 10) == 0;
    printf("privileges\n");
    if (raw == 1)
        say("ok", "CAP_NET_RAW: yes");
    else if (needs_raw)
        say("WARN", "CAP_NET_RAW: no; af_packet and af_xdp need it. Without it the provider works only "
                    "between processes of this host (host-local path). Fix: run as root or "
                    "`setcap cap_net_raw+ep <program>`");
    else
        say("ok", "CAP_NET_RAW: no (not needed by %s)", device);
    const long total = meminfo("HugePages_Total"), free_pages = meminfo("HugePages_Free");
    const char* hp = env_or("FI_DPDK_HUGEPAGES", "0");
    const int wants = strcmp(hp, "1") == 0 || strcasecmp(hp, "yes") == 0 || strcasecmp(hp, "true") == 0 ||
                      strcasecmp(hp, "on") == 0;
    if (wants && free_pages <= 0)
        say("FAIL",
            "hugepages: FI_DPDK_HUGEPAGES=%s but none are free (HugePages_Total %ld, Free %ld). Fix: "
            "reserve some (echo 512 > /proc/sys/vm/nr_hugepages) or unset FI_DPDK_HUGEPAGES",
            hp, total, free_pages);
    else
        say("ok", "hugepages: %s (HugePages_Total %ld, Free %ld)", wants ? "used" : "not used (the default)",
            total, free_pages);
}

/* ------------------------------------------------------------ device */

static void check_iface(const char* iface, const char* from)
{
    struct ifaddrs *list = NULL, *i;
    char ip[INET_ADDRSTRLEN] = "";
    if (if_nametoindex(iface) == 0) {
        say("FAIL", "interface %s (%s): no such interface. Fix: name one that `ip -br link` lists", iface, from);
        return;
    }
    int mtu = -1;
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s >= 0) {
        struct ifreq r;
        memset(&r, 0, sizeof(r));
        snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", iface);
        if (ioctl(s, SIOCGIFMTU, &r) == 0)
            mtu = r.ifr_mtu;
        close(s);
    }
    if (getifaddrs(&list) == 0) {
        for (i = list; i && !*ip; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strcmp(i->ifa_name, iface) == 0)
                inet_ntop(AF_INET, &((struct sockaddr_in*)i->ifa_addr)->sin_addr, ip, sizeof(ip));
        freeifaddrs(list);
    }
    say("ok", "interface %s (%s): exists, kernel MTU %d, IPv4 %s", iface, from, mtu, *ip ? ip : "none");
    if (!*ip && !getenv("FI_DPDK_IP"))
        say("FAIL",
            "interface %s has no IPv4 address and FI_DPDK_IP is not set. Fix: give the interface an "
            "address or set FI_DPDK_IP",
            iface);
}

/* Whether another process holds the lock file (memif roles: <path>.server,
 * <path>.client, held with flock for the holder's life). */
static int lock_held(const char* path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

static void check_memif(const char* path)
{
    char server[4096], client[4096];
    if (!*path) {
        say("FAIL", "memif: no socket path. Fix: FI_DPDK_DEVICE=memif:/tmp/<name>.sock");
        return;
    }
    snprintf(server, sizeof(server), "%s.server", path);
    snprintf(client, sizeof(client), "%s.client", path);
    const int s = lock_held(server), c = lock_held(client);
    if (s && c)
        say("FAIL",
            "memif %s: two processes already use it; memif joins exactly two. Fix: give each pair "
            "its own path, or leave FI_DPDK_DEVICE unset (the host-local path joins any number)",
            path);
    else
        say("ok", "memif %s: this process would be the %s", path,
            s ? "client (a server is there)" : "server (the first of the pair)");
}

static void check_device(const char* device)
{
    printf("device\n");
    if (!*device) {
        const char* iface = env_or("FI_DPDK_IFACE", "lo");
        say("ok", "af_packet on %s (the default; FI_DPDK_DEVICE unset)", iface);
        check_iface(iface, getenv("FI_DPDK_IFACE") ? "FI_DPDK_IFACE" : "the default");
    } else if (strncmp(device, "memif:", 6) == 0) {
        check_memif(device + 6);
    } else {
        const char* at = strstr(device, ",iface=");
        say("ok", "DPDK device %s", device);
        if (at && (strncmp(device, "net_af_packet", 13) == 0 || strncmp(device, "net_af_xdp", 10) == 0)) {
            char iface[IF_NAMESIZE + 1] = "";
            snprintf(iface, sizeof(iface), "%.*s", (int)strcspn(at + 7, ","), at + 7);
            check_iface(iface, "iface= of FI_DPDK_DEVICE");
        } else if (!getenv("FI_DPDK_IP")) {
            say("FAIL",
                "%s has no kernel interface to take an address from. Fix: set FI_DPDK_IP to this "
                "host's address on that network",
                device);
        }
    }
    const char* hl = env_or("FI_DPDK_HOST_LOCAL", "1");
    if (strncmp(device, "memif:", 6) == 0)
        say("ok", "host-local path: not used with memif (memif is itself the path between two processes)");
    else if (strcmp(hl, "0") == 0 || strcasecmp(hl, "no") == 0 || strcasecmp(hl, "false") == 0 ||
             strcasecmp(hl, "off") == 0)
        say("ok",
            "host-local path: off (FI_DPDK_HOST_LOCAL=%s): processes of this host talk through the "
            "device",
            hl);
    else
        say("ok", "host-local path: on (processes of this host meet on shared memory)");
}

/* ------------------------------------------------------------ the provider */

/* The provider's lines on stderr while it opens: its warnings are the
 * problems (what stopped it when the open failed, what it worked around
 * when it did not), its "device ... mtu ..." line is the path it chose.
 * libfabric calls the provider several times: each text is shown once. */
static void show_provider_lines(FILE* log, int open_failed)
{
    char line[2048], seen[32][256];
    int n_seen = 0;
    rewind(log);
    while (fgets(line, sizeof(line), log)) {
        line[strcspn(line, "\n")] = 0;
        const char* engine = strstr(line, "dpdk engine: ");
        const char* mine = strstr(line, "libfabric dpdk provider: ");
        const char* warn = strstr(line, ":dpdk:") ? strstr(line, "<warn> ") : NULL;
        const char* info = strstr(line, ":dpdk:") ? strstr(line, "<info> ") : NULL;
        const char* text = engine ? engine + 13 : mine ? mine + 25 : warn ? warn + 7 : info ? info + 7 : NULL;
        if (!text || (info && (strncmp(text, "device ", 7) != 0 || !strstr(text, " mtu "))))
            continue;
        /* "device X unusable: why" (fi_getinfo) and "device X: why" (fi_domain) say one thing. */
        const char* why = strstr(text, "unusable: ");
        const char* key = why                                                      ? why + 10
                          : strstr(text, ": ") && strncmp(text, "device ", 7) == 0 ? strstr(text, ": ") + 2
                                                                                   : text;
        int dup = 0;
        for (int k = 0; k < n_seen && !dup; k++)
            dup = strncmp(seen[k], key, sizeof(seen[k]) - 1) == 0;
        if (dup)
            continue;
        if (n_seen < 32)
            snprintf(seen[n_seen++], sizeof(seen[0]), "%s", key);
        if (info)
            say("ok", "the provider's choice: %s", text);
        else
            say(open_failed ? "FAIL" : "WARN", "%s", text);
    }
}

#define STEP(call)                                                                                                \
    do {                                                                                                          \
        int ret_ = (int)(call);                                                                                   \
        if (ret_) {                                                                                               \
            say("FAIL", "%s = %d (%s)", #call, ret_, fi_strerror(ret_ < 0 ? -ret_ : ret_));                       \
            goto out;                                                                                             \
        }                                                                                                         \
    } while (0)

static void open_provider(void)
{
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    struct fid_fabric* fabric = NULL;
    struct fid_domain* domain = NULL;
    struct fid_av* av = NULL;
    struct fid_cq* cq = NULL;
    struct fid_ep* ep = NULL;
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
    char name[64] = "";
    size_t name_len = sizeof(name);

    printf("opening the provider (fi_getinfo, fi_fabric, fi_domain, an RDM endpoint)\n");
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_TAGGED | FI_RMA;
    hints->fabric_attr->prov_name = strdup("dpdk");
    STEP(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    STEP(fi_fabric(info->fabric_attr, &fabric, NULL));
    STEP(fi_domain(fabric, info, &domain, NULL));
    STEP(fi_av_open(domain, &av_attr, &av, NULL));
    STEP(fi_cq_open(domain, &cq_attr, &cq, NULL));
    STEP(fi_endpoint(domain, info, &ep, NULL));
    STEP(fi_ep_bind(ep, &av->fid, 0));
    STEP(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    STEP(fi_enable(ep));
    STEP(fi_getname(&ep->fid, name, &name_len));
    if (name_len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in* sin = (const struct sockaddr_in*)name;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
        say("ok", "domain %s opened; an endpoint's address: %s:%u", info->domain_attr->name, ip,
            ntohs(sin->sin_port));
    } else {
        say("ok", "domain %s opened", info->domain_attr->name);
    }
out:
    if (ep)
        fi_close(&ep->fid);
    if (cq)
        fi_close(&cq->fid);
    if (av)
        fi_close(&av->fid);
    if (domain)
        fi_close(&domain->fid);
    if (fabric)
        fi_close(&fabric->fid);
    fi_freeinfo(info);
    fi_freeinfo(hints);
}

int main(int argc, char** argv)
{
    if (argc > 1) {
        printf("Usage: %s\n\nChecks whether the dpdk libfabric provider works with the current FI_DPDK_* "
               "settings; prints each problem with its fix, and the path the provider chose. Exit status 0: "
               "it works; 1: it would not. See fi_dpdk_doctor(1).\n",
               argv[0]);
        return strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char* device = env_or("FI_DPDK_DEVICE", "");
    printf("settings\n");
    int any = 0;
    for (char** e = environ; *e; e++)
        if (strncmp(*e, "FI_DPDK_", 8) == 0) {
            say("", "%s", *e);
            any = 1;
        }
    if (!any)
        say("", "no FI_DPDK_* variable set: the defaults");
    check_privileges(device);
    check_device(device);

    /* The provider's explanations: warnings and its chosen path are logged
     * at info level; catch stderr while it opens. */
    setenv("FI_LOG_LEVEL", "info", 1);
    setenv("FI_LOG_PROV", "dpdk", 1);
    fflush(stderr);
    FILE* log = tmpfile();
    const int saved = dup(STDERR_FILENO);
    if (log && saved >= 0)
        dup2(fileno(log), STDERR_FILENO);
    const int before = failures;
    open_provider();
    fflush(stderr);
    if (log && saved >= 0) {
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    const int open_failed = failures > before;
    if (log) {
        show_provider_lines(log, open_failed);
        fclose(log);
    }
    printf("verdict\n");
    if (open_failed || failures) {
        say("FAIL", "the dpdk provider would not work here: %d problem%s above", failures,
            failures == 1 ? "" : "s");
        return 1;
    }
    if (warnings)
        say("ok", "the dpdk provider works here, with %d warning%s above", warnings, warnings == 1 ? "" : "s");
    else
        say("ok", "the dpdk provider works here");
    return 0;
}
