#pragma once
// Forwards every engine event to several sinks (the GUI adapter and a session recorder, say).
#include <vector>

#include "engine/events/events.h"

namespace lazyscope {

class EventFanout final : public EventSink {
 public:
  void add(EventSink* sink) {
    if (sink) sinks_.push_back(sink);
  }
  void on_segment(const SegmentEvent& e) override {
    for (EventSink* s : sinks_) s->on_segment(e);
  }
  void on_block(const BlockEvent& e) override {
    for (EventSink* s : sinks_) s->on_block(e);
  }
  void on_token(const TokenEvent& e) override {
    for (EventSink* s : sinks_) s->on_token(e);
  }
  void on_request_finished(const RequestFinishedEvent& e) override {
    for (EventSink* s : sinks_) s->on_request_finished(e);
  }
  void on_pool(const PoolEvent& e) override {
    for (EventSink* s : sinks_) s->on_pool(e);
  }
  void on_device_activity(const DeviceActivity& activity) override {
    for (EventSink* s : sinks_) s->on_device_activity(activity);
  }

 private:
  std::vector<EventSink*> sinks_;
};

}  // namespace lazyscope
