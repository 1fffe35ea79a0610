#include "tests/support/thread_comm.hpp"

#include "core/error.hpp"
#include "tests/support/model_fixture.hpp"

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

namespace selfspec::testing {
namespace {

constexpr auto kDeadline = std::chrono::seconds(60);

template <typename T>
std::span<const std::byte> bytes_of(std::span<const T> values) {
  return std::as_bytes(values);
}

}  // namespace

ThreadHub::ThreadHub(int size) : size_(size), slots_(static_cast<std::size_t>(size)) {
  SELFSPEC_CHECK(size >= 1, "a thread communicator of {} ranks", size);
}

void ThreadHub::barrier(std::unique_lock<std::mutex>& lock) {
  const std::uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
    return;
  }
  SELFSPEC_CHECK(changed_.wait_for(lock, kDeadline, [&] { return generation_ != generation; }),
                 "thread communicator: a rank waited {} s for its peers (unmatched collective)",
                 kDeadline.count());
}

std::vector<std::vector<std::byte>> ThreadHub::exchange(int rank, std::span<const std::byte> mine) {
  std::unique_lock lock(mutex_);
  slots_[static_cast<std::size_t>(rank)].assign(mine.begin(), mine.end());
  barrier(lock);
  std::vector<std::vector<std::byte>> all = slots_;
  barrier(lock);
  return all;
}

ThreadComm::ThreadComm(ThreadHub& hub, int rank, bool device_buffers)
    : hub_(hub), rank_(rank), device_buffers_(device_buffers) {}

std::vector<std::byte> ThreadComm::concatenated(std::span<const std::byte> mine) {
  std::vector<std::byte> out;
  for (const auto& block : hub_.exchange(rank_, mine))
    out.insert(out.end(), block.begin(), block.end());
  return out;
}

void ThreadComm::all_reduce_sum(std::span<float> data) {
  const auto all = hub_.exchange(rank_, std::as_bytes(data));
  std::vector<float> sum(data.size(), 0.0f);
  for (const auto& block : all) {
    SELFSPEC_CHECK(block.size() == data.size_bytes(), "all_reduce_sum: unmatched sizes");
    const auto* values = reinterpret_cast<const float*>(block.data());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += values[i];
  }
  std::copy(sum.begin(), sum.end(), data.begin());
}

void ThreadComm::broadcast(std::span<std::byte> data, int root) {
  const auto all = hub_.exchange(
      rank_, rank_ == root ? std::span<const std::byte>(data) : std::span<const std::byte>());
  const auto& block = all[static_cast<std::size_t>(root)];
  SELFSPEC_CHECK(block.size() == data.size(), "broadcast: {} bytes from root, {} here",
                 block.size(), data.size());
  std::memcpy(data.data(), block.data(), block.size());
}

void ThreadComm::gather(std::span<const float> send, std::span<float> recv,
                        std::span<const std::int64_t> counts, int root) {
  SELFSPEC_CHECK(static_cast<std::int64_t>(send.size()) == counts[static_cast<std::size_t>(rank_)],
                 "gather: {} values where {} were announced", send.size(),
                 counts[static_cast<std::size_t>(rank_)]);
  const std::vector<std::byte> all = concatenated(bytes_of(send));
  if (rank_ != root) return;
  SELFSPEC_CHECK(all.size() == recv.size_bytes(), "gather: {} bytes for {}", all.size(),
                 recv.size_bytes());
  std::memcpy(recv.data(), all.data(), all.size());
}

void ThreadComm::all_gather(std::span<const float> send, std::span<float> recv,
                            std::span<const std::int64_t> counts) {
  SELFSPEC_CHECK(static_cast<std::int64_t>(send.size()) == counts[static_cast<std::size_t>(rank_)],
                 "all_gather: {} values where {} were announced", send.size(),
                 counts[static_cast<std::size_t>(rank_)]);
  const std::vector<std::byte> all = concatenated(bytes_of(send));
  SELFSPEC_CHECK(all.size() == recv.size_bytes(), "all_gather: {} bytes for {}", all.size(),
                 recv.size_bytes());
  std::memcpy(recv.data(), all.data(), all.size());
}

void ThreadComm::gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv,
                              int root) {
  const std::vector<std::byte> all = concatenated(send);
  if (rank_ != root) return;
  SELFSPEC_CHECK(all.size() == recv.size(), "gather_bytes: {} bytes for {}", all.size(),
                 recv.size());
  std::memcpy(recv.data(), all.data(), all.size());
}

void ThreadComm::all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) {
  const std::vector<std::byte> all = concatenated(std::as_bytes(std::span(&value, 1)));
  SELFSPEC_CHECK(all.size() == values.size_bytes(), "all_gather_u64: {} ranks for {} values",
                 all.size() / sizeof(value), values.size());
  std::memcpy(values.data(), all.data(), all.size());
}

void ThreadComm::barrier() {
  hub_.exchange(rank_, {});
}

void ThreadComm::all_reduce_sum_device(float* data, std::size_t count, void* /*stream*/) {
  SELFSPEC_CHECK(device_buffers_, "thread communicator made without device buffers");
  ++device_collectives_;
  all_reduce_sum({data, count});
}

void ThreadComm::all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                                         void* /*stream*/) {
  SELFSPEC_CHECK(device_buffers_, "thread communicator made without device buffers");
  ++device_collectives_;
  const std::vector<std::byte> all = concatenated({static_cast<const std::byte*>(send), bytes});
  std::memcpy(recv, all.data(), all.size());
}

void run_ranks(int ranks, bool device_buffers, const std::function<void(ThreadComm&)>& body) {
  ThreadHub hub(ranks);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        ThreadComm comm(hub, r, device_buffers);
        body(comm);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

void run_model_ranks_in_both_orders(int ranks, const std::filesystem::path& dir,
                                    const std::function<void(LlamaModel&, ThreadComm&)>& body) {
  for (ReductionOrder order : {ReductionOrder::kRankOrder, ReductionOrder::kTpInvariant}) {
    run_ranks(ranks, false, [&](ThreadComm& comm) {
      const std::unique_ptr<Backend> backend = make_cpu_backend();
      const std::unique_ptr<LlamaModel> model = load_model_on(*backend, dir, comm);
      model->set_reduction_order(order);
      body(*model, comm);
    });
  }
}

}  // namespace selfspec::testing
