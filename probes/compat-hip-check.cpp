// compat-hip-check.cpp: compile-time checks of what compat.h and gpuprobe-probe.cpp rely on in the
// HIP headers, for each header generation CI compiles (Debian's 5.2 with its hipcc; 6.1, 6.2 and 7.1
// with clang). scripts/build-probe.sh compiles it (syntax only, host and device) before every HIP
// build of the probe program. It is never part of a user's build. A generation whose layout is not
// described below is an error where the build defines GP_CHECK_REQUIRE_LAYOUT (the clang builds
// against pinned header trees, so that adding one to CI means reading its headers first); with a
// machine's own hipcc it is only noted, and the checks that hold for every generation still run.
//
// Why these checks matter even though each build uses matching headers and runtime:
//   * compat.h passes the literal 89 for the VMM attribute where the headers lack its name (5.2); a
//     5.2 build can meet a newer libamdhip64.so.5 (5.3 to 5.7), which must read 89 the same way.
//   * hipMemAllocationProp changed its member order after 5.2; the offsets below pin what each
//     generation's runtime reads, and compat.h fills the struct by member name only.
//   * A changed function signature or member type would still compile through implicit conversions
//     (an int flag, a narrower id); the exact types are asserted instead.
#include "compat.h"

#include <stddef.h>
#include <type_traits>

#if !GP_HIP
#error "compat-hip-check.cpp checks the HIP headers; compile it as HIP"
#endif

// The generation the build asked for (-DGP_EXPECT_HIP_MAJOR=7 -DGP_EXPECT_HIP_MINOR=1). Clang's
// --hip-path tree is searched after /usr/include, so without care Debian's 5.2 headers win.
#if defined(GP_EXPECT_HIP_MAJOR) && defined(GP_EXPECT_HIP_MINOR)
static_assert(HIP_VERSION_MAJOR == GP_EXPECT_HIP_MAJOR && HIP_VERSION_MINOR == GP_EXPECT_HIP_MINOR,
              "the compiler found another HIP header tree than the one the build asked for");
#endif

#define GP_SAME(a, b) static_assert(std::is_same<a, b>::value, #a " is not " #b)

// ------------------------------------------------------------------- every generation: types

// The VMM entry points, exactly as compat.h's wrappers call them.
GP_SAME(decltype(&hipMemAddressReserve),
        hipError_t (*)(void**, size_t, size_t, void*, unsigned long long));
GP_SAME(decltype(&hipMemAddressFree), hipError_t (*)(void*, size_t));
GP_SAME(decltype(&hipMemCreate),
        hipError_t (*)(hipMemGenericAllocationHandle_t*, size_t, const hipMemAllocationProp*,
                       unsigned long long));
GP_SAME(decltype(&hipMemRelease), hipError_t (*)(hipMemGenericAllocationHandle_t));
GP_SAME(decltype(&hipMemMap),
        hipError_t (*)(void*, size_t, size_t, hipMemGenericAllocationHandle_t, unsigned long long));
GP_SAME(decltype(&hipMemUnmap), hipError_t (*)(void*, size_t));
GP_SAME(decltype(&hipMemSetAccess), hipError_t (*)(void*, size_t, const hipMemAccessDesc*, size_t));
GP_SAME(decltype(&hipMemGetAllocationGranularity),
        hipError_t (*)(size_t*, const hipMemAllocationProp*, hipMemAllocationGranularity_flags));
GP_SAME(decltype(&hipDeviceGetAttribute), hipError_t (*)(int*, hipDeviceAttribute_t, int));

// The device properties: the struct the probe declares is the one the function it calls fills (from
// 6.0 both names are macros for the R0600 struct and entry point).
GP_SAME(decltype(&gpGetDeviceProperties), hipError_t (*)(gpDeviceProp*, int));
GP_SAME(decltype(gpDeviceProp::name), char[256]);         // read as a C string
GP_SAME(decltype(gpDeviceProp::gcnArchName), char[256]);  // "gfx1201:sramecc-:xnack-"
GP_SAME(decltype(gpDeviceProp::totalGlobalMem), size_t);

// The members compat.h fills, by name.
GP_SAME(gpMemAllocationProp, hipMemAllocationProp);
GP_SAME(gpMemAccessDesc, hipMemAccessDesc);
GP_SAME(decltype(hipMemAllocationProp::type), hipMemAllocationType);
GP_SAME(decltype(hipMemAllocationProp::location), hipMemLocation);
GP_SAME(decltype(hipMemAccessDesc::location), hipMemLocation);
GP_SAME(decltype(hipMemAccessDesc::flags), hipMemAccessFlags);
GP_SAME(decltype(hipMemLocation::type), hipMemLocationType);
GP_SAME(decltype(hipMemLocation::id), int);
GP_SAME(gpDevice, int);  // stored into hipMemLocation::id unconverted

// ------------------------------------------------------------- every generation: enum values

// The values the probe names. They are the same in every generation described here; a change would
// split what one probe build means on another runtime of the same soname.
static_assert(hipMemAllocationTypePinned == 1, "hipMemAllocationTypePinned");
static_assert(hipMemLocationTypeDevice == 1, "hipMemLocationTypeDevice");
static_assert(hipMemAccessFlagsProtReadWrite == 3, "hipMemAccessFlagsProtReadWrite");
static_assert(hipMemAllocationGranularityMinimum == 0, "hipMemAllocationGranularityMinimum");
static_assert(hipMemAllocationGranularityRecommended == 1, "hipMemAllocationGranularityRecommended");
static_assert(hipDeviceAttributeIntegrated == 16, "hipDeviceAttributeIntegrated");
static_assert(hipDeviceAttributePciBusId == 67, "hipDeviceAttributePciBusId");
static_assert(hipDeviceAttributePciDeviceId == 68, "hipDeviceAttributePciDeviceId");
static_assert(hipDeviceAttributePciDomainID == 69, "hipDeviceAttributePciDomainID");
static_assert(hipDeviceAttributeWarpSize == 87, "hipDeviceAttributeWarpSize");
static_assert(hipDeviceAttributeMemoryPoolsSupported == 88, "hipDeviceAttributeMemoryPoolsSupported");
static_assert(hipSuccess == 0, "hipSuccess");
static_assert(hipErrorPeerAccessAlreadyEnabled == 704, "hipErrorPeerAccessAlreadyEnabled");
static_assert(hipMemcpyHostToDevice == 1 && hipMemcpyDeviceToHost == 2, "hipMemcpyKind");

// The VMM attribute: named from 5.3 on, and then 89, the value compat.h writes for older headers.
#if GP_HIP_AT_LEAST(5, 3)
static_assert(hipDeviceAttributeVirtualMemoryManagementSupported == 89,
              "compat.h's literal for 5.2 headers no longer names the VMM attribute");
// Equal values cannot tell a name from a literal; the macro's spelling can.
constexpr bool gp_streq(const char* a, const char* b) {
    return *a == *b && (*a == '\0' || gp_streq(a + 1, b + 1));
}
#define GP_SPELLING_(x) #x
#define GP_SPELLING(x) GP_SPELLING_(x)
static_assert(gp_streq(GP_SPELLING(GP_ATTR_VMM), "hipDeviceAttributeVirtualMemoryManagementSupported"),
              "compat.h must use the name where the headers have it");
#else
// 5.2 ends the CUDA-compatible attributes at 88 (MemoryPoolsSupported, asserted above) and starts
// the AMD-specific ones at 10000: 89 is the next free value, the one 5.3 gave the VMM attribute.
static_assert(hipDeviceAttributeAmdSpecificBegin == 10000, "hipDeviceAttributeAmdSpecificBegin");
static_assert(GP_ATTR_VMM == (hipDeviceAttribute_t)89, "compat.h's VMM attribute literal");
#endif

// --------------------------------------------------------------- per generation: the layout

// What the runtime of each generation reads: sizes and the offsets of the members compat.h sets.
struct GpLayout {
    size_t prop_size, prop_type, prop_location;  // hipMemAllocationProp
    size_t access_size, access_flags;            // hipMemAccessDesc
    size_t location_size, location_id;           // hipMemLocation
    size_t dev_size, dev_total, dev_gcn;         // hipDeviceProp_t: size, totalGlobalMem, gcnArchName
};

#if HIP_VERSION_MAJOR == 5 && HIP_VERSION_MINOR == 2
// Debian bookworm's libamdhip64-dev 5.2.3: compressionType first, the old hipDeviceProp_t.
constexpr GpLayout kLayout = {32, 16, 4, 12, 8, 8, 4, 792, 256, 396};
#elif HIP_VERSION_MAJOR == 6 && (HIP_VERSION_MINOR == 1 || HIP_VERSION_MINOR == 2)
// type first; hipDeviceProp_tR0600.
constexpr GpLayout kLayout = {32, 0, 8, 12, 8, 8, 4, 1472, 288, 1160};
#elif HIP_VERSION_MAJOR == 7 && HIP_VERSION_MINOR == 1
constexpr GpLayout kLayout = {32, 0, 8, 12, 8, 8, 4, 1472, 288, 1160};
#elif defined(GP_CHECK_REQUIRE_LAYOUT)
#error "compat-hip-check.cpp: this HIP header generation is not described; read its headers and add its layout"
#define GP_NO_LAYOUT 1
#else
#pragma message("compat-hip-check.cpp: no layout recorded for this HIP header generation; layout not checked")
#define GP_NO_LAYOUT 1
#endif

#ifndef GP_NO_LAYOUT
static_assert(sizeof(hipMemAllocationProp) == kLayout.prop_size, "sizeof(hipMemAllocationProp)");
static_assert(offsetof(hipMemAllocationProp, type) == kLayout.prop_type, "hipMemAllocationProp::type");
static_assert(offsetof(hipMemAllocationProp, location) == kLayout.prop_location,
              "hipMemAllocationProp::location");
static_assert(sizeof(hipMemAccessDesc) == kLayout.access_size, "sizeof(hipMemAccessDesc)");
static_assert(offsetof(hipMemAccessDesc, location) == 0, "hipMemAccessDesc::location");
static_assert(offsetof(hipMemAccessDesc, flags) == kLayout.access_flags, "hipMemAccessDesc::flags");
static_assert(sizeof(hipMemLocation) == kLayout.location_size, "sizeof(hipMemLocation)");
static_assert(offsetof(hipMemLocation, type) == 0, "hipMemLocation::type");
static_assert(offsetof(hipMemLocation, id) == kLayout.location_id, "hipMemLocation::id");
static_assert(sizeof(gpDeviceProp) == kLayout.dev_size, "sizeof(hipDeviceProp_t)");
static_assert(offsetof(gpDeviceProp, name) == 0, "hipDeviceProp_t::name");
static_assert(offsetof(gpDeviceProp, totalGlobalMem) == kLayout.dev_total, "hipDeviceProp_t::totalGlobalMem");
static_assert(offsetof(gpDeviceProp, gcnArchName) == kLayout.dev_gcn, "hipDeviceProp_t::gcnArchName");
#endif

// -DGP_CHECK_WARNING_SELFTEST: one warning in the project's own code. scripts/build-probe.sh expects
// this to fail under -Wall -Wextra -Werror, proving that those flags reach the project's code while
// the HIP headers (system headers) stay exempt.
#ifdef GP_CHECK_WARNING_SELFTEST
int gp_selftest(int unused_parameter) { return 0; }
#endif
