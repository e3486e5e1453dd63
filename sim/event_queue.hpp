#pragma once
// The event queue: small POD events in a binary heap ordered by (time, insertion sequence),
// so simultaneous events run in the order they were scheduled. No allocation per event
// beyond the heap's amortised growth.
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/sim_time.hpp"

namespace loom::sim {

/// What an event does when it fires.
enum class EventKind : std::uint8_t { TASK_DONE, BATCH_DONE, NETWORK_WAKEUP };

/// One scheduled event.
struct Event {
  SimTime time = 0;
  std::uint64_t seq = 0;
  std::uint64_t payload = 0;  ///< task id, batch id or network token
  EventKind kind = EventKind::TASK_DONE;
};

/// Min-heap of events by (time, seq).
class EventQueue {
 public:
  /// Schedules an event; returns its sequence number.
  std::uint64_t push(SimTime time, EventKind kind, std::uint64_t payload) {
    Event e{time, next_seq_++, payload, kind};
    heap_.push_back(e);
    sift_up(heap_.size() - 1);
    return e.seq;
  }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  /// Time of the earliest event, or INT64 max when empty.
  SimTime next_time() const {
    return heap_.empty() ? std::numeric_limits<SimTime>::max() : heap_.front().time;
  }
  /// Removes and returns the earliest event (queue must not be empty).
  Event pop() {
    Event top = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return top;
  }
  void clear() { heap_.clear(); }

 private:
  static bool before(const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  void sift_up(std::size_t i) {
    Event e = heap_[i];
    while (i > 0) {
      std::size_t p = (i - 1) / 2;
      if (!before(e, heap_[p])) break;
      heap_[i] = heap_[p];
      i = p;
    }
    heap_[i] = e;
  }
  void sift_down(std::size_t i) {
    const std::size_t n = heap_.size();
    Event e = heap_[i];
    while (true) {
      std::size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && before(heap_[c + 1], heap_[c])) ++c;
      if (!before(heap_[c], e)) break;
      heap_[i] = heap_[c];
      i = c;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace loom::sim
