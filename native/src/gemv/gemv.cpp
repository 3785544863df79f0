// The gemv family's one entry point: the weight format picks the launcher (gemv.h).
#include "gemv/gemv.h"

#include <cstring>
#include <string>

#include "pygpukit_native/errors.h"

namespace pgk {

void gemv(const GemvArgs& a, const char* format) {
  if (std::strcmp(format, "dense") == 0) {
    gemv_dense(a);
  } else if (std::strcmp(format, "fp8") == 0) {
    gemv_fp8(a);
  } else if (std::strcmp(format, "int4") == 0) {
    gemv_int4(a);
  } else if (std::strcmp(format, "nvfp4") == 0) {
    gemv_nvfp4(a);
  } else {
    fail("gemv", std::string("unknown weight format '") + format +
                     "' (dense, fp8, int4, nvfp4)");
  }
}

}  // namespace pgk
