// none: every placement is encoded afresh and dropped after the request (no reuse, not even
// of a repeat inside the request); the kernel honours the shift like lazy's.
#include "engine/kv/plan_builder.h"

namespace lazyscope {

PlacedDocument plan_none_document(PlanBuilder& builder, const DocumentSlot& slot) {
  return PlacedDocument{builder.encode(slot, false, slot.key), DocumentUse::Miss, slot.shift};
}

}  // namespace lazyscope
