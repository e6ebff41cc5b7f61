// lazy: the document's KV is stored once at its encoding positions and shared; the attention
// kernel rotates the query by the placement's shift, so any position is a hit without a copy.
#include "engine/kv/plan_builder.h"

namespace lazyscope {

PlacedDocument plan_lazy_document(PlanBuilder& builder, const DocumentSlot& slot) {
  PlacedDocument placed = builder.base(slot, true);
  placed.table_shift = slot.shift;
  return placed;
}

}  // namespace lazyscope
