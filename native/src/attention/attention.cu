// sdpa and sdpa_varlen: the dense and packed-varlen modes of the shared row kernel
// (attn_rows.cuh). The decode mode is instantiated by the attention_decode family.
#include "attention/attention.h"

#include "attention/attn_rows.cuh"

namespace pgk {

void attention_rows(const AttnArgs& a) {
  switch (a.mode) {
    case AttnMode::dense:
      attn::launch_rows<AttnMode::dense>(a, "sdpa");
      break;
    case AttnMode::varlen:
      attn::launch_rows<AttnMode::varlen>(a, "sdpa_varlen");
      break;
    default:
      fail("attention_rows", "mode must be dense or varlen (decode: attention_decode family)");
  }
}

}  // namespace pgk
