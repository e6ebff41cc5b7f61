// positional: one rotated copy per (document, start) is cached; a hit is the same document at
// the same start. A new start encodes the base (not kept) and keeps a copy rotated to it.
#include "engine/kv/plan_builder.h"

namespace lazyscope {

PlacedDocument plan_positional_document(PlanBuilder& builder, const DocumentSlot& slot) {
  const uint64_t key = hash_tokens(slot.key, {slot.start});
  if (const int64_t hit = builder.cached(slot, key); hit >= 0) return {hit, DocumentUse::Hit, 0};
  if (const int64_t here = builder.made_here(key); here >= 0) return {here, DocumentUse::Repeat, 0};
  // Placed where it was encoded: the encode is the positional copy.
  if (slot.shift == 0) return {builder.encode(slot, true, key), DocumentUse::Miss, 0};
  const PlacedDocument base = builder.base(slot, false);  // never published: a miss or a repeat
  return {builder.rotated_copy(slot, base.segment, true, key), base.use, 0};
}

}  // namespace lazyscope
