// materialized (Block-Attention as it must run): the base KV is cached once at its encoding
// positions; every placement at a nonzero shift gets a re-rotated copy that lives for the
// request. A hit is the same document anywhere, but it costs a copy.
#include "engine/kv/plan_builder.h"

namespace lazyscope {

PlacedDocument plan_materialized_document(PlanBuilder& builder, const DocumentSlot& slot) {
  const PlacedDocument base = builder.base(slot, true);
  if (slot.shift == 0) return PlacedDocument{base.segment, base.use, 0};
  return PlacedDocument{builder.rotated_copy(slot, base.segment, false, 0), base.use, 0};
}

}  // namespace lazyscope
