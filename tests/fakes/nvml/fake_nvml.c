/*
 * A fake libnvidia-ml.so.1 for voltpack's tests: the NVML entry points that pynvml
 * (nvidia-ml-py) and voltpack.telemetry.nvml call, answering from a state file.
 *
 * State: the file named by $FAKE_NVML_STATE, `key=value` lines (`#` starts a comment).
 * It is re-read on every call and setters write it back (atomically, via rename), so a
 * test and a separate agent process see the same GPUs and each other's settings.
 *
 *   count=8                           number of GPUs
 *   driver_version=550.54.15
 *   err.<nvmlFunction>=<code>         every call of that function returns <code>
 *   gpu.<i>.lost=1                    every call on GPU i returns NVML_ERROR_GPU_IS_LOST
 *   gpu.<i>.err.<nvmlFunction>=<code> that function returns <code> for GPU i only
 *   gpu.<i>.<field>=<value>           name, uuid, bus_id, memory_total, memory_used,
 *                                     util_gpu, util_memory, power_mw, energy_mj,
 *                                     power_limit_mw, power_min_mw, power_max_mw,
 *                                     power_default_mw, sm_clock_mhz, mem_clock_mhz,
 *                                     clock_min_mhz, clock_max_mhz, locked_min_mhz,
 *                                     locked_max_mhz, temperature_c, throttle_reasons,
 *                                     mig_current, mig_pending, numa_node,
 *                                     ecc_uncorrected_volatile, ecc_uncorrected_aggregate,
 *                                     ecc_corrected_volatile, ecc_corrected_aggregate,
 *                                     nvlinks (link slots), nvlink.<l>=<remote PCI bus id>
 *   topology.<i>.<j>=<level>          nvmlGpuTopologyLevel_t for i < j
 *
 * Fault signals:
 *   gpu.<i>.xid_queue=79,48           XIDs not yet delivered: nvmlEventSetWait_v2 on a set
 *                                     registered for XID events on GPU i pops the first one
 *                                     and writes the rest back (the first set to wait gets
 *                                     it; a real driver gives every registered set a copy)
 *   gpu.<i>.remap_correctable, remap_uncorrectable, remap_pending, remap_failure
 *                                     nvmlDeviceGetRemappedRows (absent: not supported)
 *   gpu.<i>.nvlink_err.<l>.<c>=<n>    nvmlDeviceGetNvLinkErrorCounter of link l, counter c
 *                                     (0 replay, 1 recovery, 2 CRC flit, 3 CRC data,
 *                                     4 ECC data); 0 when absent on an existing link
 *   A lost GPU (gpu.<i>.lost=1) and throttle_reasons (HW thermal 0x40, power brake 0x80)
 *   as above. nvmlEventSetWait_v2 never blocks: with no event it answers NVML_ERROR_TIMEOUT
 *   at once, whatever the timeout.
 *
 * A field missing from the file is a sensor the device lacks: NVML_ERROR_NOT_SUPPORTED.
 * Compile: gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 fake_nvml.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;
struct fake_device { int index; };

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned int version, powerScope, powerValueMw; } nvmlPowerValue_v2_t;

#define MAX_GPUS 64
#define FAKE_STATE_ENV "FAKE_NVML_STATE"
#include "../fake_state.h"

static struct fake_device devices[MAX_GPUS];
static int init_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A symbol no real NVML has: lets a test check that "libnvidia-ml.so.1" is this fake. */
int fakeNvmlIsFake(void) { return 1; }


static void unset(const char *key) {
    for (int i = 0; i < entries; i++)
        if (strcmp(keys[i], key) == 0) {
            entries--;
            memcpy(keys[i], keys[entries], KEY_LEN);
            memcpy(vals[i], vals[entries], VAL_LEN);
            return;
        }
}

static const char *gpu_get(int idx, const char *field) {
    char key[KEY_LEN];
    snprintf(key, sizeof key, "gpu.%d.%s", idx, field);
    return get(key);
}

static void gpu_set_u64(int idx, const char *field, unsigned long long value) {
    char key[KEY_LEN], val[VAL_LEN];
    snprintf(key, sizeof key, "gpu.%d.%s", idx, field);
    snprintf(val, sizeof val, "%llu", value);
    set(key, val);
}

static void gpu_unset(int idx, const char *field) {
    char key[KEY_LEN];
    snprintf(key, sizeof key, "gpu.%d.%s", idx, field);
    unset(key);
}

static nvmlReturn_t gpu_u64(int idx, const char *field, unsigned long long *out) {
    const char *v = gpu_get(idx, field);
    if (!v) return NVML_ERROR_NOT_SUPPORTED;
    *out = strtoull(v, NULL, 0);
    return NVML_SUCCESS;
}

/* ---- entry and exit of every call ---------------------------------------------------- */

static int gpu_count(void) {
    const char *v = get("count");
    int n = v ? atoi(v) : 0;
    return n > MAX_GPUS ? MAX_GPUS : n;
}

/* Lock, re-read the state, apply the error injected for `fn`. */
static nvmlReturn_t begin(const char *fn) {
    char key[KEY_LEN];
    const char *v;
    pthread_mutex_lock(&lock);
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (load_state() != 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    snprintf(key, sizeof key, "err.%s", fn);
    v = get(key);
    return v ? atoi(v) : NVML_SUCCESS;
}

/* begin() for a call on one GPU: also checks the handle, GPU loss and per-GPU errors. */
static nvmlReturn_t begin_dev(const char *fn, nvmlDevice_t dev, int *idx) {
    char field[KEY_LEN];
    const char *v;
    nvmlReturn_t ret = begin(fn);
    if (ret != NVML_SUCCESS) return ret;
    if (dev < devices || dev >= devices + MAX_GPUS) return NVML_ERROR_INVALID_ARGUMENT;
    *idx = dev->index;
    if (*idx >= gpu_count()) return NVML_ERROR_INVALID_ARGUMENT;
    if ((v = gpu_get(*idx, "lost")) && atoi(v)) return NVML_ERROR_GPU_IS_LOST;
    snprintf(field, sizeof field, "err.%s", fn);
    v = gpu_get(*idx, field);
    return v ? atoi(v) : NVML_SUCCESS;
}

static nvmlReturn_t end(nvmlReturn_t ret) {
    pthread_mutex_unlock(&lock);
    return ret;
}

#define BEGIN(fn) do { nvmlReturn_t r_ = begin(fn); if (r_) return end(r_); } while (0)
#define BEGIN_DEV(fn, dev, idx) \
    do { nvmlReturn_t r_ = begin_dev(fn, dev, idx); if (r_) return end(r_); } while (0)

/* ---- library and system ------------------------------------------------------------ */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&lock);
    if (load_state() != 0) return end(NVML_ERROR_DRIVER_NOT_LOADED);
    if (get("err.nvmlInit")) return end(atoi(get("err.nvmlInit")));
    init_count++;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    if (init_count == 0) return end(NVML_ERROR_UNINITIALIZED);
    init_count--;
    return end(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    const char *v;
    BEGIN("nvmlSystemGetDriverVersion");
    v = get("driver_version");
    if (!v) return end(NVML_ERROR_NOT_SUPPORTED);
    if (strlen(v) + 1 > length) return end(NVML_ERROR_INSUFFICIENT_SIZE);
    strcpy(version, v);
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    BEGIN("nvmlDeviceGetCount_v2");
    *count = (unsigned int)gpu_count();
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    const char *v;
    BEGIN("nvmlDeviceGetHandleByIndex_v2");
    if (index >= (unsigned int)gpu_count()) return end(NVML_ERROR_INVALID_ARGUMENT);
    if ((v = gpu_get((int)index, "lost")) && atoi(v)) return end(NVML_ERROR_GPU_IS_LOST);
    devices[index].index = (int)index;
    *device = &devices[index];
    return end(NVML_SUCCESS);
}

/* ---- inventory ------------------------------------------------------------------- */

static nvmlReturn_t get_string(const char *fn, const char *field, nvmlDevice_t dev, char *out,
                               unsigned int length) {
    int idx;
    const char *v;
    BEGIN_DEV(fn, dev, &idx);
    v = gpu_get(idx, field);
    if (!v) return end(NVML_ERROR_NOT_SUPPORTED);
    if (strlen(v) + 1 > length) return end(NVML_ERROR_INSUFFICIENT_SIZE);
    strcpy(out, v);
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length) {
    return get_string("nvmlDeviceGetName", "name", dev, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length) {
    return get_string("nvmlDeviceGetUUID", "uuid", dev, uuid, length);
}

static void fill_pci(const char *bus_id, nvmlPciInfo_t *pci) {
    unsigned int domain = 0, bus = 0, device = 0, function = 0;
    memset(pci, 0, sizeof *pci);
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &device, &function);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = 0x233010de;
    copy(pci->busId, sizeof pci->busId, bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.%x", domain, bus,
             device, function);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    int idx;
    const char *v;
    BEGIN_DEV("nvmlDeviceGetPciInfo_v3", dev, &idx);
    if (!(v = gpu_get(idx, "bus_id"))) return end(NVML_ERROR_NOT_SUPPORTED);
    fill_pci(v, pci);
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *memory) {
    int idx;
    unsigned long long total, used;
    BEGIN_DEV("nvmlDeviceGetMemoryInfo", dev, &idx);
    if (gpu_u64(idx, "memory_total", &total) || gpu_u64(idx, "memory_used", &used))
        return end(NVML_ERROR_NOT_SUPPORTED);
    memory->total = total;
    memory->used = used;
    memory->free = total - used;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current,
                                  unsigned int *pending) {
    int idx;
    unsigned long long cur, pend;
    BEGIN_DEV("nvmlDeviceGetMigMode", dev, &idx);
    if (gpu_u64(idx, "mig_current", &cur)) return end(NVML_ERROR_NOT_SUPPORTED);
    if (gpu_u64(idx, "mig_pending", &pend)) pend = cur;
    *current = (unsigned int)cur;
    *pending = (unsigned int)pend;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, int *node) {
    int idx;
    const char *v;
    BEGIN_DEV("nvmlDeviceGetNumaNodeId", dev, &idx);
    if (!(v = gpu_get(idx, "numa_node"))) return end(NVML_ERROR_NOT_SUPPORTED);
    *node = atoi(v);
    return end(NVML_SUCCESS);
}

/* ---- samples: one unsigned field each ------------------------------------------------ */

#define UINT_GETTER(fn, field, type)                                  \
    nvmlReturn_t fn(nvmlDevice_t dev, type *out) {                    \
        int idx;                                                      \
        unsigned long long v;                                         \
        nvmlReturn_t ret;                                             \
        BEGIN_DEV(#fn, dev, &idx);                                    \
        ret = gpu_u64(idx, field, &v);                                \
        if (ret == NVML_SUCCESS) *out = (type)v;                      \
        return end(ret);                                              \
    }

UINT_GETTER(nvmlDeviceGetPowerUsage, "power_mw", unsigned int)
UINT_GETTER(nvmlDeviceGetTotalEnergyConsumption, "energy_mj", unsigned long long)
UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, "power_limit_mw", unsigned int)
UINT_GETTER(nvmlDeviceGetPowerManagementLimit, "power_limit_mw", unsigned int)
UINT_GETTER(nvmlDeviceGetPowerManagementDefaultLimit, "power_default_mw", unsigned int)
UINT_GETTER(nvmlDeviceGetCurrentClocksThrottleReasons, "throttle_reasons", unsigned long long)
UINT_GETTER(nvmlDeviceGetCurrentClocksEventReasons, "throttle_reasons", unsigned long long)

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util) {
    int idx;
    unsigned long long gpu, memory;
    BEGIN_DEV("nvmlDeviceGetUtilizationRates", dev, &idx);
    if (gpu_u64(idx, "util_gpu", &gpu) || gpu_u64(idx, "util_memory", &memory))
        return end(NVML_ERROR_NOT_SUPPORTED);
    util->gpu = (unsigned int)gpu;
    util->memory = (unsigned int)memory;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, unsigned int sensor,
                                      unsigned int *temp) {
    int idx;
    unsigned long long v;
    nvmlReturn_t ret;
    BEGIN_DEV("nvmlDeviceGetTemperature", dev, &idx);
    if (sensor != 0) return end(NVML_ERROR_INVALID_ARGUMENT);
    ret = gpu_u64(idx, "temperature_c", &v);
    if (ret == NVML_SUCCESS) *temp = (unsigned int)v;
    return end(ret);
}

/* Clock types: 0 graphics, 1 SM, 2 memory, 3 video. Locked clocks clamp graphics/SM. */
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, unsigned int type, unsigned int *clock) {
    int idx;
    unsigned long long v, lo, hi;
    nvmlReturn_t ret;
    BEGIN_DEV("nvmlDeviceGetClockInfo", dev, &idx);
    if (type == 0 || type == 1) {
        ret = gpu_u64(idx, "sm_clock_mhz", &v);
        if (ret == NVML_SUCCESS && !gpu_u64(idx, "locked_min_mhz", &lo) &&
            !gpu_u64(idx, "locked_max_mhz", &hi))
            v = v < lo ? lo : (v > hi ? hi : v);
    } else if (type == 2) {
        ret = gpu_u64(idx, "mem_clock_mhz", &v);
    } else {
        return end(NVML_ERROR_NOT_SUPPORTED);
    }
    if (ret == NVML_SUCCESS) *clock = (unsigned int)v;
    return end(ret);
}

/* errorType: 0 corrected, 1 uncorrected; counterType: 0 volatile, 1 aggregate. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, unsigned int errorType,
                                         unsigned int counterType, unsigned long long *count) {
    static const char *fields[2][2] = {
        {"ecc_corrected_volatile", "ecc_corrected_aggregate"},
        {"ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"},
    };
    int idx;
    BEGIN_DEV("nvmlDeviceGetTotalEccErrors", dev, &idx);
    if (errorType > 1 || counterType > 1) return end(NVML_ERROR_INVALID_ARGUMENT);
    return end(gpu_u64(idx, fields[errorType][counterType], count));
}

/* ---- power limits -------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned int *min,
                                                          unsigned int *max) {
    int idx;
    unsigned long long lo, hi;
    BEGIN_DEV("nvmlDeviceGetPowerManagementLimitConstraints", dev, &idx);
    if (gpu_u64(idx, "power_min_mw", &lo) || gpu_u64(idx, "power_max_mw", &hi))
        return end(NVML_ERROR_NOT_SUPPORTED);
    *min = (unsigned int)lo;
    *max = (unsigned int)hi;
    return end(NVML_SUCCESS);
}

static nvmlReturn_t set_power_limit(const char *fn, nvmlDevice_t dev, unsigned int limit) {
    int idx;
    unsigned long long lo, hi;
    BEGIN_DEV(fn, dev, &idx);
    if (gpu_u64(idx, "power_min_mw", &lo) || gpu_u64(idx, "power_max_mw", &hi))
        return end(NVML_ERROR_NOT_SUPPORTED);
    if (limit < lo || limit > hi) return end(NVML_ERROR_INVALID_ARGUMENT);
    gpu_set_u64(idx, "power_limit_mw", limit);
    return end(save_state() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN);
}

nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t dev, unsigned int limit) {
    return set_power_limit("nvmlDeviceSetPowerManagementLimit", dev, limit);
}

nvmlReturn_t nvmlDeviceSetPowerManagementLimit_v2(nvmlDevice_t dev, nvmlPowerValue_v2_t *value) {
    return set_power_limit("nvmlDeviceSetPowerManagementLimit_v2", dev, value->powerValueMw);
}

/* ---- clocks -------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t dev, unsigned int min, unsigned int max) {
    int idx;
    unsigned long long lo, hi;
    BEGIN_DEV("nvmlDeviceSetGpuLockedClocks", dev, &idx);
    if (gpu_u64(idx, "clock_min_mhz", &lo) || gpu_u64(idx, "clock_max_mhz", &hi))
        return end(NVML_ERROR_NOT_SUPPORTED);
    if (min > max || min < lo || max > hi) return end(NVML_ERROR_INVALID_ARGUMENT);
    gpu_set_u64(idx, "locked_min_mhz", min);
    gpu_set_u64(idx, "locked_max_mhz", max);
    return end(save_state() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN);
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t dev) {
    int idx;
    BEGIN_DEV("nvmlDeviceResetGpuLockedClocks", dev, &idx);
    gpu_unset(idx, "locked_min_mhz");
    gpu_unset(idx, "locked_max_mhz");
    return end(save_state() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN);
}

/* ---- topology ------------------------------------------------------------------------ */

/* Links 0..nvlinks-1 exist; a link is active when gpu.<i>.nvlink.<l> names its remote. */
static nvmlReturn_t nvlink_remote(nvmlDevice_t dev, unsigned int link, const char *fn,
                                  const char **remote) {
    int idx;
    unsigned long long slots;
    char field[KEY_LEN];
    BEGIN_DEV(fn, dev, &idx);
    if (gpu_u64(idx, "nvlinks", &slots) || slots == 0) return end(NVML_ERROR_NOT_SUPPORTED);
    if (link >= slots) return end(NVML_ERROR_INVALID_ARGUMENT);
    snprintf(field, sizeof field, "nvlink.%u", link);
    *remote = gpu_get(idx, field);
    return NVML_SUCCESS; /* still locked: the caller copies *remote, then calls end() */
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link,
                                      unsigned int *isActive) {
    const char *remote = NULL;
    nvmlReturn_t ret = nvlink_remote(dev, link, "nvmlDeviceGetNvLinkState", &remote);
    if (ret) return ret;
    *isActive = remote != NULL;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned int link,
                                                 nvmlPciInfo_t *pci) {
    const char *remote = NULL;
    nvmlReturn_t ret = nvlink_remote(dev, link, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &remote);
    if (ret) return ret;
    if (!remote) return end(NVML_ERROR_NOT_FOUND);
    fill_pci(remote, pci);
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                 unsigned int *level) {
    int i, j;
    char key[KEY_LEN];
    const char *v;
    BEGIN_DEV("nvmlDeviceGetTopologyCommonAncestor", a, &i);
    if (b < devices || b >= devices + MAX_GPUS || b->index >= gpu_count())
        return end(NVML_ERROR_INVALID_ARGUMENT);
    j = b->index;
    snprintf(key, sizeof key, "topology.%d.%d", i < j ? i : j, i < j ? j : i);
    if (!(v = get(key))) return end(NVML_ERROR_NOT_SUPPORTED);
    *level = (unsigned int)atoi(v);
    return end(NVML_SUCCESS);
}

/* ---- fault signals ------------------------------------------------------------------- */

#define XID_CRITICAL_ERROR 0x8ULL
#define MAX_EVENT_SETS 256

typedef struct fake_event_set { int used; unsigned long long types[MAX_GPUS]; } *nvmlEventSet_t;
static struct fake_event_set event_sets[MAX_EVENT_SETS];

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

static int valid_set(nvmlEventSet_t set) {
    return set >= event_sets && set < event_sets + MAX_EVENT_SETS && set->used;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    BEGIN("nvmlEventSetCreate");
    for (int i = 0; i < MAX_EVENT_SETS; i++)
        if (!event_sets[i].used) {
            memset(&event_sets[i], 0, sizeof event_sets[i]);
            event_sets[i].used = 1;
            *set = &event_sets[i];
            return end(NVML_SUCCESS);
        }
    return end(NVML_ERROR_UNKNOWN);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    BEGIN("nvmlEventSetFree");
    if (!valid_set(set)) return end(NVML_ERROR_INVALID_ARGUMENT);
    set->used = 0;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t dev, unsigned long long *types) {
    int idx;
    BEGIN_DEV("nvmlDeviceGetSupportedEventTypes", dev, &idx);
    *types = XID_CRITICAL_ERROR;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                      nvmlEventSet_t set) {
    int idx;
    BEGIN_DEV("nvmlDeviceRegisterEvents", dev, &idx);
    if (!valid_set(set)) return end(NVML_ERROR_INVALID_ARGUMENT);
    if (types & ~XID_CRITICAL_ERROR) return end(NVML_ERROR_NOT_SUPPORTED);
    set->types[idx] |= types;
    return end(NVML_SUCCESS);
}

/* Pops the first XID of a registered GPU's queue; never blocks. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t es, nvmlEventData_t *data,
                                 unsigned int timeoutms) {
    (void)timeoutms;
    BEGIN("nvmlEventSetWait_v2");
    if (!valid_set(es)) return end(NVML_ERROR_INVALID_ARGUMENT);
    for (int idx = 0; idx < gpu_count(); idx++) {
        const char *queue, *v;
        char rest[VAL_LEN], key[KEY_LEN];
        if (!(es->types[idx] & XID_CRITICAL_ERROR)) continue;
        if ((v = gpu_get(idx, "lost")) && atoi(v)) return end(NVML_ERROR_GPU_IS_LOST);
        queue = gpu_get(idx, "xid_queue");
        if (!queue || !*queue) continue;
        devices[idx].index = idx;
        memset(data, 0, sizeof *data);
        data->device = &devices[idx];
        data->eventType = XID_CRITICAL_ERROR;
        data->eventData = strtoull(queue, NULL, 0);
        v = strchr(queue, ',');
        copy(rest, sizeof rest, v ? v + 1 : "");
        snprintf(key, sizeof key, "gpu.%d.xid_queue", idx);
        set(key, rest);
        return end(save_state() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN);
    }
    return end(NVML_ERROR_TIMEOUT);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred) {
    int idx;
    unsigned long long corr = 0, unc = 0, pending, failure = 0;
    BEGIN_DEV("nvmlDeviceGetRemappedRows", dev, &idx);
    if (gpu_u64(idx, "remap_pending", &pending)) return end(NVML_ERROR_NOT_SUPPORTED);
    gpu_u64(idx, "remap_correctable", &corr);
    gpu_u64(idx, "remap_uncorrectable", &unc);
    gpu_u64(idx, "remap_failure", &failure);
    *corrRows = (unsigned int)corr;
    *uncRows = (unsigned int)unc;
    *isPending = (unsigned int)pending;
    *failureOccurred = (unsigned int)failure;
    return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t dev, unsigned int link,
                                             unsigned int counter, unsigned long long *value) {
    const char *remote = NULL;
    char field[KEY_LEN];
    unsigned long long v = 0;
    int idx;
    nvmlReturn_t ret = nvlink_remote(dev, link, "nvmlDeviceGetNvLinkErrorCounter", &remote);
    if (ret) return ret;
    if (counter > 4) return end(NVML_ERROR_INVALID_ARGUMENT);
    idx = dev->index;
    snprintf(field, sizeof field, "nvlink_err.%u.%u", link, counter);
    gpu_u64(idx, field, &v);
    *value = v;
    return end(NVML_SUCCESS);
}
