// BackgroundScheduler (scheduler.h): a Scheduler on its own thread. The
// thread runs steps while there is work, delivers each step's events with no
// lock held, and sleeps on a condition variable when idle.
#include <exception>

#include "core/error.h"
#include "speculative/scheduler/scheduler.h"

namespace mtp::speculative {

BackgroundScheduler::BackgroundScheduler(std::unique_ptr<Scheduler> s, Callback on_event)
    : s_(std::move(s)), on_event_(std::move(on_event)) {
  MTP_CHECK(s_ != nullptr, "BackgroundScheduler needs a scheduler");
  thread_ = std::thread([this] { loop(); });
}

BackgroundScheduler::~BackgroundScheduler() { stop(); }

uint64_t BackgroundScheduler::submit(Request r) {
  uint64_t id;
  {
    std::lock_guard lk(mu_);
    if (stop_) fail<InputError>("the scheduler has been stopped");
    id = s_->submit(std::move(r));
  }
  cv_.notify_all();
  return id;
}

bool BackgroundScheduler::cancel(uint64_t id) {
  bool ok;
  {
    std::lock_guard lk(mu_);
    ok = s_->cancel(id);
    pending_ = pending_ || ok;
  }
  cv_.notify_all();  // the Finish event waits for the loop to deliver it
  return ok;
}

void BackgroundScheduler::wait_idle() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return stop_ || (s_->idle() && !delivering_ && !pending_); });
}

std::string BackgroundScheduler::last_error() const {
  std::lock_guard lk(mu_);
  return error_;
}

void BackgroundScheduler::stop() {
  {
    std::lock_guard lk(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundScheduler::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    if (stop_) s_->cancel_all();
    std::vector<Event> ev = s_->take_events();
    if (ev.empty()) {
      if (stop_) break;
      if (s_->idle()) {
        pending_ = false;
        idle_cv_.notify_all();
        cv_.wait(lk, [&] { return stop_ || !s_->idle() || pending_events(); });
        continue;
      }
      try {
        s_->step();
      } catch (const std::exception& e) {
        // Never lets an exception end the thread: every sequence ends
        // (cancelled) and the message is kept for last_error().
        error_ = e.what();
        s_->cancel_all();
      }
      ev = s_->take_events();
    }
    pending_ = false;
    delivering_ = true;
    lk.unlock();
    if (on_event_) {
      for (const Event& e : ev) on_event_(e);
    }
    lk.lock();
    delivering_ = false;
  }
  idle_cv_.notify_all();
}

}  // namespace mtp::speculative
