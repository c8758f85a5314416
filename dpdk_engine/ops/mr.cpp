// Memory region registry: see mr.h.
#include "dpdk_engine/ops/mr.h"

#include <cerrno>
#include <cstring>
#include <new>

namespace dpdk_engine {

namespace {

// Requested keys are often small and sequential (0, 1, 2, ... or 0xC0DE):
// mix them so they spread over the table instead of forming one long run.
// This is the splitmix64 finalizer (Steele, Lea, Flood, OOPSLA 2014).
inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

constexpr size_t kInitialCapacity = 16;

}  // namespace

MemoryRegistry::MemoryRegistry(bool virt_addr, bool prov_key) : virt_addr_(virt_addr), prov_key_(prov_key)
{ }

size_t MemoryRegistry::home(uint64_t key) const
{
    return static_cast<size_t>(mix64(key)) & mask_;
}

// Linear probing: the run from the key's home slot up to the first empty
// slot holds every key that hashes there. The load factor stays <= 1/2, so
// runs are short and an empty slot always exists.
const MemoryRegistry::Slot* MemoryRegistry::find(uint64_t key) const
{
    if (slots_.empty())
        return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
        const Slot& s = slots_[i];
        if (!s.used)
            return nullptr;
        if (s.key == key)
            return &s;
    }
}

// Places a slot whose key is known to be absent. Needs a free slot.
void MemoryRegistry::insert_slot(const Slot& s)
{
    size_t i = home(s.key);
    while (slots_[i].used)
        i = (i + 1) & mask_;
    slots_[i] = s;
    slots_[i].used = 1;
}

// Doubles the table (or creates it) and rehashes. Returns 0 or -ENOMEM; on
// failure the old table is intact.
int MemoryRegistry::grow()
{
    size_t cap = slots_.empty() ? kInitialCapacity : slots_.size() * 2;
    if (cap == 0 || cap > SIZE_MAX / 2 / sizeof(Slot))
        return -ENOMEM;
    std::vector<Slot> old;
    try {
        old.resize(cap);  // value-initialised: every slot empty
    } catch (const std::bad_alloc&) {
        return -ENOMEM;
    }
    old.swap(slots_);
    mask_ = cap - 1;
    for (const Slot& s : old)
        if (s.used)
            insert_slot(s);
    return 0;
}

// Draws a fresh key: random, non-zero, not used by a live region. With 2^64
// values a collision is practically never seen, but uniqueness is promised,
// so it is checked rather than assumed.
int MemoryRegistry::random_key(uint64_t* key)
{
    for (;;) {
        uint64_t k;
        int rc = keys_.next(&k);
        if (rc != 0)
            return rc;
        if (k != 0 && find(k) == nullptr) {
            *key = k;
            return 0;
        }
    }
}

int MemoryRegistry::add(void* base, size_t len, uint32_t access, uint64_t requested_key, uint64_t* key_out,
                        uint64_t remote_start)
{
    if (len > 0 && base == nullptr)
        return -EINVAL;
    if ((access & ~kMrAccessAll) != 0)
        return -EINVAL;
    uint64_t start = virt_addr_ ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base)) : remote_start;
    // A region whose last byte would sit past 2^64 - 1 cannot exist in
    // memory; refusing it keeps every end computation in check() exact.
    if (static_cast<uint64_t>(len) > UINT64_MAX - start)
        return -EINVAL;

    uint64_t key = requested_key;
    if (!prov_key_ && find(key) != nullptr)
        return -EEXIST;

    // Grow before drawing the key so that a failure consumes nothing.
    if (slots_.empty() || (count_ + 1) * 2 > slots_.size()) {
        int rc = grow();
        if (rc != 0)
            return rc;
    }
    if (prov_key_) {
        int rc = random_key(&key);
        if (rc != 0)
            return rc;
    }

    Slot s {};
    s.key = key;
    s.start = start;
    s.len = static_cast<uint64_t>(len);
    s.base = static_cast<uint8_t*>(base);
    s.access = access;
    s.serial = next_serial_++;
    insert_slot(s);
    count_++;
    if (key_out != nullptr)
        *key_out = key;
    return 0;
}

// Backward-shift deletion (Knuth 6.4, Algorithm R): after emptying slot i,
// every later entry of the same run whose home lies cyclically at or before
// i moves back into the hole, so lookups never stop early at a hole and no
// tombstones pile up.
int MemoryRegistry::remove(uint64_t key)
{
    const Slot* found = find(key);
    if (found == nullptr)
        return -ENOENT;
    size_t i = static_cast<size_t>(found - slots_.data());
    slots_[i].used = 0;
    for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
        size_t h = home(slots_[j].key);
        // Entry j may fill the hole at i unless its home lies in (i, j]
        // cyclically, i.e. it would then sit before its home.
        bool home_in_between = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
        if (home_in_between)
            continue;
        slots_[i] = slots_[j];
        slots_[j].used = 0;
        i = j;
    }
    // Do not leave a dead key readable in an empty slot.
    slots_[i] = Slot {};
    count_--;
    return 0;
}

int MemoryRegistry::set_events(uint64_t key, void* events)
{
    const Slot* found = find(key);
    if (found == nullptr)
        return -ENOENT;
    slots_[static_cast<size_t>(found - slots_.data())].events = events;
    return 0;
}

void* MemoryRegistry::events(uint64_t key) const
{
    const Slot* s = find(key);
    return s ? s->events : nullptr;
}

uint64_t MemoryRegistry::serial(uint64_t key) const
{
    const Slot* s = find(key);
    return s ? s->serial : 0;
}

void MemoryRegistry::reregister_for_test(uint64_t key)
{
    if (const Slot* s = find(key))
        slots_[static_cast<size_t>(s - slots_.data())].serial = next_serial_++;
}

wire::WireStatus MemoryRegistry::check(uint64_t key, uint64_t addr, uint64_t len, uint32_t needed,
                                       uint8_t** out) const
{
    const Slot* s = find(key);
    if (s == nullptr)
        return wire::WireStatus::kInvalidKey;
    if ((s->access & needed) != needed)
        return wire::WireStatus::kAccessDenied;
    // Written so that nothing can wrap: off <= s->len is checked before
    // s->len - off is formed, and addr + len is never computed.
    if (addr < s->start)
        return wire::WireStatus::kOutOfBounds;
    uint64_t off = addr - s->start;
    if (off > s->len || len > s->len - off)
        return wire::WireStatus::kOutOfBounds;
    if (out != nullptr)
        *out = s->base + off;
    return wire::WireStatus::kOk;
}

}  // namespace dpdk_engine
