#include "core/thread_scratch.h"

#include <mutex>
#include <unordered_set>

namespace vidax {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
std::unordered_set<ThreadScratchBase*>& registry() {
  static auto* set = new std::unordered_set<ThreadScratchBase*>();  // outlives thread exits
  return *set;
}

}  // namespace

ThreadScratchBase::ThreadScratchBase() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().insert(this);
}

ThreadScratchBase::~ThreadScratchBase() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(this);
}

size_t release_thread_scratch() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (ThreadScratchBase* s : registry()) s->release();
  return registry().size();
}

}  // namespace vidax
