// Classic pcap writer. See pcap.h.
#include "dpdk_engine/port/pcap.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dpdk_engine {

namespace {

// Layouts from the pcap file format (draft-ietf-opsawg-pcap), host order.
struct FileHeader {
    uint32_t magic;
    uint16_t version_major;
    uint16_t version_minor;
    int32_t thiszone;  // always 0
    uint32_t sigfigs;  // always 0
    uint32_t snaplen;
    uint32_t linktype;
};
static_assert(sizeof(FileHeader) == 24, "pcap file header is 24 bytes");

struct RecordHeader {
    uint32_t ts_sec;
    uint32_t ts_nsec;  // nanoseconds, because of kPcapMagicNs
    uint32_t incl_len;
    uint32_t orig_len;
};
static_assert(sizeof(RecordHeader) == 16, "pcap record header is 16 bytes");

// Big enough to hold a few bursts of full-size frames, so the data path only
// pays a memcpy and the kernel sees large writes.
constexpr size_t kBufferSize = 1u << 20;

// "%p" -> pid, "%%" -> "%"; false on any other '%' sequence.
bool expand_path(const char* path, std::string* out)
{
    out->clear();
    for (const char* c = path; *c; c++) {
        if (*c != '%') {
            out->push_back(*c);
        } else if (c[1] == 'p') {
            *out += std::to_string(getpid());
            c++;
        } else if (c[1] == '%') {
            out->push_back('%');
            c++;
        } else {
            return false;
        }
    }
    return true;
}

// Opens `name` for writing, holding an exclusive flock, and empties it.
// Returns the fd, -EWOULDBLOCK when another writer holds the lock, or -errno.
int open_locked(const std::string& name)
{
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno == EWOULDBLOCK ? -EWOULDBLOCK : -errno;
        ::close(fd);
        return err;
    }
    // Truncate only after taking the lock: never under a live writer. Not
    // regular (a fifo, /dev/full): nothing to truncate.
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) {
        const int err = -errno;
        ::close(fd);
        return err;
    }
    return fd;
}

}  // namespace

PcapWriter::~PcapWriter()
{
    close();
}

int PcapWriter::open(const char* path)
{
    if (!path || !*path)
        return -EINVAL;
    close();
    error_ = 0;
    frames_ = 0;
    std::string name;
    if (!expand_path(path, &name))
        return -EINVAL;
    int fd = open_locked(name);
    // Another writer has this file: fall back to names of our own.
    const std::string fallback = name + "." + std::to_string(getpid());
    for (int n = 1; fd == -EWOULDBLOCK && n <= 8; n++) {
        std::string alt = n == 1 ? fallback : fallback + "." + std::to_string(n);
        fd = open_locked(alt);
        if (fd >= 0) {
            fprintf(stderr, "dpdk: pcap file %s is being written by another writer; writing %s\n", name.c_str(),
                    alt.c_str());
            name = alt;
        }
    }
    if (fd == -EWOULDBLOCK)
        return -EBUSY;
    if (fd < 0)
        return fd;
    FILE* f = fdopen(fd, "wb");
    if (!f) {
        const int err = -errno;
        ::close(fd);
        return err;
    }
    // Full buffering with our own size; stdio allocates the buffer once here,
    // never on the data path. Failure only means the default buffer.
    setvbuf(f, nullptr, _IOFBF, kBufferSize);
    FileHeader h;
    h.magic = kPcapMagicNs;
    h.version_major = kPcapVersionMajor;
    h.version_minor = kPcapVersionMinor;
    h.thiszone = 0;
    h.sigfigs = 0;
    h.snaplen = kPcapSnapLen;
    h.linktype = kPcapLinkTypeEthernet;
    errno = 0;  // fwrite need not set it: never report a stale value
    if (fwrite(&h, sizeof(h), 1, f) != 1) {
        const int err = errno ? -errno : -EIO;
        fclose(f);
        return err;
    }
    f_ = f;
    path_ = name;
    return 0;
}

void PcapWriter::write(const uint8_t* frame, size_t len, uint64_t ts_ns)
{
    if (!f_ || error_)
        return;
    const size_t incl = len < kPcapSnapLen ? len : kPcapSnapLen;
    RecordHeader r;
    r.ts_sec = static_cast<uint32_t>(ts_ns / 1000000000u);
    r.ts_nsec = static_cast<uint32_t>(ts_ns % 1000000000u);
    r.incl_len = static_cast<uint32_t>(incl);
    r.orig_len = static_cast<uint32_t>(len > UINT32_MAX ? UINT32_MAX : len);
    errno = 0;
    if (fwrite(&r, sizeof(r), 1, f_) != 1 || (incl && fwrite(frame, incl, 1, f_) != 1)) {
        error_ = errno ? -errno : -EIO;
        return;
    }
    frames_++;
}

void PcapWriter::close()
{
    if (!f_)
        return;
    errno = 0;
    if (fclose(f_) != 0 && !error_)
        error_ = errno ? -errno : -EIO;
    f_ = nullptr;
    path_.clear();
}

}  // namespace dpdk_engine
