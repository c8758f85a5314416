// Packet capture to a classic pcap file (FI_DPDK_PCAP): every frame the
// engine sends or receives, readable by Wireshark and tcpdump.
//
// Classic pcap rather than pcapng because it is trivially written from the
// data path (16-byte record header, no blocks) and every tool reads it.
// Magic 0xa1b23c4d = nanosecond timestamps; LINKTYPE_ETHERNET. Written in
// host byte order, as libpcap does (readers detect the order by the magic).
//
// Not thread-safe: one writer per progress context.
//
// Several processes (an MPI job exports one FI_DPDK_PCAP to every rank) or
// several engines of one process may be given the same path. Two writers of
// one file would interleave records into garbage, so a writer holds an
// exclusive flock() on its file: "%p" in the path expands to the process id,
// and a writer that finds its file locked by another one writes
// "<path>.<pid>" (then "<path>.<pid>.2", ...) instead and says so on stderr.
#ifndef DPDK_ENGINE_PORT_PCAP_H
#define DPDK_ENGINE_PORT_PCAP_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dpdk_engine {

// File format constants, exposed for tests and readers.
constexpr uint32_t kPcapMagicNs = 0xa1b23c4d;
constexpr uint16_t kPcapVersionMajor = 2;
constexpr uint16_t kPcapVersionMinor = 4;
constexpr uint32_t kPcapLinkTypeEthernet = 1;
constexpr uint32_t kPcapSnapLen = 65535;  // longer frames are truncated

class PcapWriter {
 public:
    PcapWriter() = default;
    ~PcapWriter();  // closes (flushes) the file
    PcapWriter(const PcapWriter&) = delete;
    PcapWriter& operator=(const PcapWriter&) = delete;

    // Creates (truncates) the file named by `path` with "%p" replaced by the
    // process id and "%%" by "%", locks it (see above: a locked file makes
    // the writer pick "<name>.<pid>[.<n>]"), and writes the file header. A
    // writer that is already open is closed first; path() tells the name.
    // Returns 0; -EINVAL when path is NULL or empty or has a '%' other than
    // "%p" or "%%"; -EBUSY when every fallback name is locked too; or -errno
    // from open/fwrite (e.g. -ENOENT, -EACCES, -ENOSPC).
    int open(const char* path);

    // The file being written ("" when not open).
    const std::string& path() const { return path_; }

    // Appends one frame captured at ts_ns (nanoseconds since the Unix epoch;
    // CLOCK_REALTIME gives Wireshark real dates). At most kPcapSnapLen bytes
    // are stored; the record keeps the original length. Buffered: costs a
    // memcpy until the stdio buffer fills. No-op when not open. An I/O
    // error stops further writes; last_error() reports it.
    void write(const uint8_t* frame, size_t len, uint64_t ts_ns);

    // Flushes and closes; no-op when not open. An error while flushing is
    // kept in last_error().
    void close();

    bool is_open() const { return f_ != nullptr; }

    // 0, or the first -errno seen by write() or close() since open().
    int last_error() const { return error_; }

    // Frames written since open().
    uint64_t frames() const { return frames_; }

 private:
    FILE* f_ = nullptr;
    std::string path_;
    int error_ = 0;
    uint64_t frames_ = 0;
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_PCAP_H
