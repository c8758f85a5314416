// libfabric's auth_key (fi_domain(3), fi_endpoint(3)) as the engine's job
// key (docs/design.md section 2, fi_dpdk(7) SECURITY): a consumer that
// passes domain_attr->auth_key gets what FI_DPDK_AUTH_KEY would give it.
//
// The rules, one place for all of them:
//  * a key is exactly 16 bytes (128 bits, like the 32 hex digits of
//    FI_DPDK_AUTH_KEY); any other non-zero auth_key_size, or a NULL
//    auth_key with one, is -FI_EINVAL (fi_getinfo: no match);
//  * the engine, and so the key, is one per process and device: the first
//    domain's key (or the environment's) is the process's; a later domain
//    with another key, or with a key where the environment has another
//    one, is refused -FI_EINVAL naming both sources; a domain without a key
//    uses the process's (if any);
//  * an endpoint's own key (ep_attr->auth_key) must be the process's key:
//    per-endpoint keys are not supported (-FI_EOPNOTSUPP).
#include <cstring>

#include "dpdk_engine/wire/auth.h"
#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {

bool JobKey::operator==(const JobKey& o) const noexcept
{
    return set == o.set && (!set || memcmp(bytes, o.bytes, sizeof(bytes)) == 0);
}

void JobKey::wipe() noexcept
{
    volatile unsigned char* p = bytes;
    for (size_t i = 0; i < sizeof(bytes); i++)
        p[i] = 0;
    set = false;
}

int job_key_from_attr(const uint8_t* key, size_t size, const char* what, JobKey* out) noexcept
{
    out->set = false;
    if (size == 0)
        return 0;
    if (size != kJobKeyBytes || !key) {
        report_setup_error("%s: auth_key_size %zu%s: the dpdk provider takes a 16-byte (128-bit) job key", what,
                           size, key ? "" : " with a NULL auth_key");
        return -FI_EINVAL;
    }
    memcpy(out->bytes, key, kJobKeyBytes);
    out->set = true;
    return 0;
}

namespace {

// The environment's key (FI_DPDK_AUTH_KEY or FI_DPDK_AUTH_KEY_FILE), read
// the way the engine reads it. false when unset or unreadable (the engine
// then says why when it starts).
bool env_job_key(const dpdk_engine::EngineConfig& cfg, JobKey* out)
{
    out->set = false;
    dpdk_engine::wire::AuthKey k;
    dpdk_engine::wire::AuthKeyStatus st;
    if (!cfg.auth_key.empty() && cfg.auth_key_file.empty()) {
        st = dpdk_engine::wire::parse_auth_key(cfg.auth_key.data(), cfg.auth_key.size(), &k);
    } else if (cfg.auth_key.empty() && !cfg.auth_key_file.empty()) {
        std::string why;
        st = dpdk_engine::wire::load_auth_key_file(cfg.auth_key_file.c_str(), &k, &why);
    } else {
        return false;
    }
    if (st == dpdk_engine::wire::AuthKeyStatus::kOk) {
        memcpy(out->bytes, k.bytes, kJobKeyBytes);
        out->set = true;
    }
    dpdk_engine::wire::wipe_auth_key(&k);
    return out->set;
}

const char* env_key_name(const dpdk_engine::EngineConfig& cfg)
{
    return cfg.auth_key_file.empty() ? "FI_DPDK_AUTH_KEY" : "FI_DPDK_AUTH_KEY_FILE";
}

}  // namespace

int apply_job_key(const JobKey& wanted, dpdk_engine::EngineConfig* cfg, JobKey* effective)
{
    const bool env_set = !cfg->auth_key.empty() || !cfg->auth_key_file.empty();
    JobKey env;
    env_job_key(*cfg, &env);
    if (!wanted.set) {
        *effective = env;
        env.wipe();
        return 0;
    }
    if (env_set) {
        const bool readable = env.set;
        const bool same = readable && env == wanted;
        env.wipe();
        if (!same) {
            report_setup_error("domain_attr->auth_key conflicts with %s (%s): one job key per process; pass "
                               "the same key or unset the variable",
                               env_key_name(*cfg), readable ? "another key" : "which cannot be read");
            return -FI_EINVAL;
        }
        *effective = wanted;  // the engine reads it from the environment
        return 0;
    }
    static const char hex[] = "0123456789abcdef";
    cfg->auth_key.assign(2 * kJobKeyBytes, '0');
    for (size_t i = 0; i < kJobKeyBytes; i++) {
        cfg->auth_key[2 * i] = hex[wanted.bytes[i] >> 4];
        cfg->auth_key[2 * i + 1] = hex[wanted.bytes[i] & 15];
    }
    *effective = wanted;
    return 0;
}

int check_ep_job_key(const fi_info* info, const JobKey& process_key) noexcept
{
    if (!info->ep_attr || !info->ep_attr->auth_key_size)
        return 0;
    JobKey k;
    int ret = job_key_from_attr(info->ep_attr->auth_key, info->ep_attr->auth_key_size, "fi_endpoint", &k);
    if (ret)
        return ret;
    const bool same = k == process_key;
    k.wipe();
    if (same)
        return 0;
    report_setup_error("fi_endpoint: ep_attr->auth_key differs from the %s: per-endpoint keys are not "
                       "supported (one job key per process, fi_dpdk(7) SECURITY)",
                       process_key.set ? "domain's (the process's) job key" : "process, which runs without a key");
    return -FI_EOPNOTSUPP;
}

}  // namespace dpdk_fi
