// fi_dpdk_alltoall: N processes of one host exchange tagged messages all to
// all, every byte checked, waiting for completions with fi_cq_sread (a
// blocking wait: with more processes than cores, a process that spins takes
// the core its peers need). Any provider: run it with FI_PROVIDER=shm for a
// comparison.
//
// The processes find each other through a directory: each writes its
// endpoint name to <dir>/addr.<rank> and waits for all of them; at the end
// each writes <dir>/done.<rank> and waits for all before it closes, so no
// process leaves while a peer still needs its acknowledgements.
//
//   fi_dpdk_alltoall -r RANK -n NPROCS -d DIR [-i ITERATIONS]
//                    [-s SIZE[,SIZE...]] [-t TIMEOUT_S]
//
// Each iteration, for each size: a receive posted for every peer, a send to
// every peer, then all of them completed. Exit status 0 when every message
// arrived with the right length and bytes; rank 0 prints the aggregate
// message rate of the job as the slowest rank saw it.
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cinttypes>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#include "fabtests/common/rank_job.h"

namespace {

using rank_job::die;
using rank_job::now_s;
using rank_job::write_file;

struct Options {
    int rank = -1;
    int nprocs = 0;
    std::string dir;
    int iterations = 10;
    std::vector<size_t> sizes {64, 65536};
    int timeout_s = 60;
};

Options parse(int argc, char** argv)
{
    Options o;
    int c;
    while ((c = getopt(argc, argv, "r:n:d:i:s:t:")) != -1) {
        switch (c) {
        case 'r': o.rank = atoi(optarg); break;
        case 'n': o.nprocs = atoi(optarg); break;
        case 'd': o.dir = optarg; break;
        case 'i': o.iterations = atoi(optarg); break;
        case 't': o.timeout_s = atoi(optarg); break;
        case 's': {
            o.sizes.clear();
            for (char* tok = strtok(optarg, ","); tok; tok = strtok(nullptr, ","))
                o.sizes.push_back(strtoull(tok, nullptr, 0));
            break;
        }
        default:
            fprintf(stderr, "usage: %s -r RANK -n NPROCS -d DIR [-i ITER] [-s SIZES] [-t TIMEOUT_S]\n", argv[0]);
            exit(2);
        }
    }
    if (o.nprocs < 2 || o.rank < 0 || o.rank >= o.nprocs || o.dir.empty() || o.iterations < 1 || o.sizes.empty())
        die("bad arguments (need -r RANK < -n NPROCS >= 2 and -d DIR)");
    return o;
}

std::string path(const Options& o, const char* what, int rank)
{
    return o.dir + "/" + what + "." + std::to_string(rank);
}

// Waits until <dir>/<what>.<r> exists for every rank; returns their contents.
std::vector<std::string> gather(const Options& o, const char* what, double deadline)
{
    std::vector<std::string> out(size_t(o.nprocs));
    for (int r = 0; r < o.nprocs; r++) {
        for (;;) {
            FILE* f = fopen(path(o, what, r).c_str(), "rb");
            if (f) {
                char buf[256];
                const size_t n = fread(buf, 1, sizeof(buf), f);
                fclose(f);
                out[size_t(r)].assign(buf, n);
                break;
            }
            if (now_s() > deadline)
                die("rank %d never wrote its %s file", r, what);
            usleep(2000);
        }
    }
    return out;
}

uint8_t pattern(int src, int dst, int iter, size_t size_index, size_t i)
{
    return uint8_t(src * 131 + dst * 31 + iter * 7 + int(size_index) * 3 + int(i));
}

uint64_t make_tag(int src, int iter, size_t size_index)
{
    return (uint64_t(iter) << 32) | (uint64_t(size_index) << 16) | uint64_t(src);
}

using rank_job::Fabric;

// Reads `want` completions, sleeping in fi_cq_sread between them.
void complete(Fabric& f, size_t want, double deadline)
{
    fi_cq_tagged_entry e[64];
    while (want > 0) {
        if (now_s() > deadline)
            die("%zu completions missing at the deadline", want);
        const ssize_t n = fi_cq_sread(f.cq, e, want < 64 ? want : 64, nullptr, 1000);
        if (n > 0) {
            want -= size_t(n);
            continue;
        }
        if (n == -FI_EAGAIN)
            continue;
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err {};
            fi_cq_readerr(f.cq, &err, 0);
            die("error completion: %s (%s)", fi_strerror(err.err),
                fi_cq_strerror(f.cq, err.prov_errno, err.err_data, nullptr, 0));
        }
        die("fi_cq_sread = %zd (%s)", n, fi_strerror(int(-n)));
    }
}

// Posts with the FI_EAGAIN retry every consumer writes: progress by
// reading the CQ, keeping what it returns.
template <typename Post> void post(Fabric& f, size_t* early, const char* what, Post&& p)
{
    for (;;) {
        const ssize_t ret = p();
        if (ret == 0)
            return;
        if (ret != -FI_EAGAIN)
            die("%s = %zd (%s)", what, ret, fi_strerror(int(-ret)));
        fi_cq_tagged_entry e;
        const ssize_t n = fi_cq_read(f.cq, &e, 1);
        if (n == 1)
            (*early)++;
        else if (n == -FI_EAVAIL)
            complete(f, 1, now_s() + 1);  // reports the error
    }
}

}  // namespace

int main(int argc, char** argv)
{
    const Options o = parse(argc, argv);
    rank_job::g_rank = o.rank;
    const double started = now_s();
    const double deadline = started + o.timeout_s;
    Fabric f;
    rank_job::open_fabric(&f);

    char name[256];
    size_t name_len = sizeof(name);
    RANK_JOB_CHECK(fi_getname(&f.ep->fid, name, &name_len));
    write_file(path(o, "addr", o.rank), name, name_len);
    const std::vector<std::string> names = gather(o, "addr", deadline);
    std::vector<fi_addr_t> peer(size_t(o.nprocs));
    for (int r = 0; r < o.nprocs; r++)
        if (fi_av_insert(f.av, names[size_t(r)].data(), 1, &peer[size_t(r)], 0, nullptr) != 1)
            die("fi_av_insert of rank %d", r);

    const double setup_s = now_s() - started;
    const size_t peers = size_t(o.nprocs - 1);
    size_t max_size = 0;
    for (size_t s : o.sizes)
        max_size = s > max_size ? s : max_size;
    std::vector<std::vector<uint8_t>> rx(size_t(o.nprocs), std::vector<uint8_t>(max_size));
    std::vector<std::vector<uint8_t>> tx(size_t(o.nprocs), std::vector<uint8_t>(max_size));
    std::vector<fi_context2> ctx(2 * size_t(o.nprocs));
    uint64_t messages = 0, bytes = 0;
    const double t0 = now_s();
    for (int it = 0; it < o.iterations; it++) {
        for (size_t si = 0; si < o.sizes.size(); si++) {
            const size_t len = o.sizes[si];
            size_t early = 0;
            for (int p = 0; p < o.nprocs; p++) {
                if (p == o.rank)
                    continue;
                memset(rx[size_t(p)].data(), 0, len);
                post(f, &early, "fi_trecv", [&] {
                    return fi_trecv(f.ep, rx[size_t(p)].data(), len, nullptr, peer[size_t(p)], make_tag(p, it, si),
                                    0, &ctx[size_t(p)]);
                });
            }
            // Each rank starts with the next one, so no rank is everyone's
            // first destination.
            for (int k = 1; k < o.nprocs; k++) {
                const int q = (o.rank + k) % o.nprocs;
                uint8_t* b = tx[size_t(q)].data();
                for (size_t i = 0; i < len; i++)
                    b[i] = pattern(o.rank, q, it, si, i);
                post(f, &early, "fi_tsend", [&] {
                    return fi_tsend(f.ep, b, len, nullptr, peer[size_t(q)], make_tag(o.rank, it, si),
                                    &ctx[size_t(o.nprocs + q)]);
                });
            }
            complete(f, 2 * peers - early, deadline);
            for (int p = 0; p < o.nprocs; p++) {
                if (p == o.rank)
                    continue;
                const uint8_t* b = rx[size_t(p)].data();
                for (size_t i = 0; i < len; i++)
                    if (b[i] != pattern(p, o.rank, it, si, i))
                        die("iteration %d, %zu B from rank %d: byte %zu is 0x%02x, expected 0x%02x", it, len, p, i,
                            b[i], pattern(p, o.rank, it, si, i));
            }
            messages += peers;
            bytes += peers * len;
        }
    }
    const double secs = now_s() - t0;
    rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    char result[128];
    const int n = snprintf(result, sizeof(result), "%.6f %.6f %ld", secs, setup_s, ru.ru_maxrss);
    write_file(path(o, "done", o.rank), result, size_t(n));
    const std::vector<std::string> done = gather(o, "done", deadline);
    if (o.rank == 0) {
        double slowest = 0, setup = 0;
        long rss_kib = 0;
        for (const std::string& d : done) {
            double t = 0, u = 0;
            long k = 0;
            if (sscanf(d.c_str(), "%lf %lf %ld", &t, &u, &k) != 3)
                die("bad done file");
            slowest = std::max(slowest, t);
            setup = std::max(setup, u);
            rss_kib = std::max(rss_kib, k);
        }
        const double total = double(messages) * o.nprocs;
        printf("alltoall %s: %d processes, %d iterations of %zu size(s): %.0f messages received, %.0f MB, "
               "%.3f s (slowest rank): %.0f msg/s, %.1f MB/s aggregate; set-up (start to all addresses known) "
               "%.2f s, largest peak RSS %.1f MiB\n",
               f.info->fabric_attr->prov_name, o.nprocs, o.iterations, o.sizes.size(), total,
               double(bytes) * o.nprocs / 1e6, slowest, total / slowest, double(bytes) * o.nprocs / 1e6 / slowest,
               setup, double(rss_kib) / 1024);
    }
    rank_job::close_fabric(&f);
    return 0;
}
