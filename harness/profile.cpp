#include "harness/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "harness/errors.hpp"

namespace loom::harness {

namespace {

using Json = nlohmann::ordered_json;

constexpr double US = 1e6;  // the file keeps microseconds, as nccl-tests prints them

// Median, min, max, spread and sample count; the median under `median_key`.
void put_timing(Json& j, const Timing& t, const char* median_key) {
  j[median_key] = t.median * US;
  j["min_us"] = t.min * US;
  j["max_us"] = t.max * US;
  j["spread"] = t.spread;
  j["samples"] = t.samples;
}

Json device_json(const DeviceInfo& d) {
  Json j;
  j["name"] = d.name;
  j["device_count"] = d.device_count;
  j["compute_capability"] =
      fmt::format("{}.{}", d.compute_capability / 10, d.compute_capability % 10);
  j["sm_count"] = d.sm_count;
  j["sm_clock_mhz"] = d.sm_clock_mhz;
  j["memory_clock_mhz"] = d.memory_clock_mhz;
  j["memory_bus_bits"] = d.memory_bus_bits;
  j["memory_bytes"] = d.memory_bytes;
  j["power_limit_w"] = d.power_limit_w;
  j["driver_cuda_version"] = d.driver_version;
  j["cuda_runtime_version"] = d.runtime_version;
  j["cublas_version"] = d.cublas_version;
  j["nccl_version"] = d.nccl_version;
  return j;
}

// One loom collective table (docs/calibration.md) per (op, group size); the time loom uses
// is the mean of the out-of-place and in-place medians, as for an nccl-tests import.
Json collectives_json(const HarnessProfile& p) {
  std::map<std::pair<std::string, int>, std::vector<const CollectiveResult*>> tables;
  for (const CollectiveResult& r : p.collectives) tables[{r.op, r.group_size}].push_back(&r);
  Json out = Json::array();
  for (auto& [key, rows] : tables) {
    std::sort(rows.begin(), rows.end(), [](const CollectiveResult* a, const CollectiveResult* b) {
      return a->bytes < b->bytes;
    });
    Json t;
    t["op"] = key.first;
    t["group_size"] = key.second;
    t["nodes"] = rows.front()->nodes;
    t["gpu"] = p.device.name;
    t["program"] = "loom-harness nccl";
    t["source"] = "loom-harness";
    Json points = Json::array();
    for (const CollectiveResult* r : rows) {
      if (!points.empty() && points.back()["bytes"] == r->bytes) continue;  // each size once
      Json q;
      q["bytes"] = r->bytes;
      q["time_us"] = (r->out_of_place.median + r->in_place.median) / 2 * US;
      q["out_of_place_us"] = r->out_of_place.median * US;
      q["in_place_us"] = r->in_place.median * US;
      q["source"] = fmt::format("loom-harness nccl {} {} B", key.first, r->bytes);
      points.push_back(q);
    }
    t["points"] = points;
    out.push_back(t);
  }
  return out;
}

}  // namespace

double flops_per_second(const GemmResult& r) {
  return 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k) /
         r.time.median;
}

double bytes_per_second(const MemoryResult& r) {
  return static_cast<double>(r.bytes) / r.time.median;
}

std::string profile_to_json(const HarnessProfile& p) {
  Json doc;
  doc["format"] = "loom-calibration";
  doc["version"] = 1;
  doc["harness"] = {{"program", "loom-harness"}, {"command", p.command}, {"date", p.date}};
  if (p.clock.l2_flush_bytes > 0) {
    doc["harness"]["timing"] = {{"gemm_memory", "one launch per sample behind an L2 flush"},
                                {"nccl_launch", "a loop of back-to-back launches per sample"},
                                {"l2_flush_bytes", p.clock.l2_flush_bytes}};
  }
  if (p.clock.warmup_s > 0) {
    doc["harness"]["clock_warmup"] = {{"seconds", p.clock.warmup_s},
                                      {"steady", p.clock.steady},
                                      {"tflops", p.clock.steady_tflops},
                                      {"sm_clock_mhz", p.clock.sm_clock_mhz}};
  }
  doc["device"] = device_json(p.device);
  doc["collectives"] = collectives_json(p);
  Json gemm = Json::array();
  for (const GemmResult& r : p.gemm) {
    Json j = {{"dtype", r.dtype}, {"m", r.m}, {"n", r.n}, {"k", r.k}};
    put_timing(j, r.time, "time_us");
    j["tflops"] = flops_per_second(r) / 1e12;
    j["algorithm"] = r.algorithm;
    gemm.push_back(j);
  }
  doc["gemm"] = gemm;
  Json memory = Json::array();
  for (const MemoryResult& r : p.memory) {
    Json j = {{"kernel", r.kernel}, {"bytes", r.bytes}};
    put_timing(j, r.time, "time_us");
    j["gb_per_s"] = bytes_per_second(r) / 1e9;
    memory.push_back(j);
  }
  doc["memory"] = memory;
  if (!p.launch.empty()) {
    Json launch = Json::array();
    for (const LaunchResult& r : p.launch) {
      Json j = {{"what", r.what}};
      put_timing(j, r.time, "time_us");
      launch.push_back(j);
    }
    doc["launch"] = launch;
  }
  return doc.dump(2) + "\n";
}

void write_profile(const HarnessProfile& profile, const std::string& path) {
  std::ofstream out(path);
  out << profile_to_json(profile);
  out.close();
  if (!out) {
    throw UsageError(
        fmt::format("{}: cannot write the profile; check the folder exists and is writable", path));
  }
}

std::string device_text(const DeviceInfo& d) {
  std::string out;
  out += fmt::format("gpu:                {} (x{} visible)\n", d.name, d.device_count);
  out += fmt::format("compute capability: {}.{}\n", d.compute_capability / 10,
                     d.compute_capability % 10);
  out += fmt::format("SMs:                {}\n", d.sm_count);
  out += fmt::format("SM clock (max):     {:.0f} MHz\n", d.sm_clock_mhz);
  out += fmt::format("memory clock (max): {:.0f} MHz, {}-bit bus\n", d.memory_clock_mhz,
                     d.memory_bus_bits);
  out += fmt::format("memory:             {:.1f} GiB\n",
                     static_cast<double>(d.memory_bytes) / (1 << 30));
  out += d.power_limit_w > 0 ? fmt::format("power limit:        {:.0f} W\n", d.power_limit_w)
                             : std::string("power limit:        unknown (NVML not available)\n");
  out += fmt::format("driver (CUDA):      {}\nCUDA runtime:       {}\n", d.driver_version,
                     d.runtime_version);
  out += fmt::format("cuBLASLt:           {}\nNCCL:               {}\n", d.cublas_version,
                     d.nccl_version.empty() ? "unknown" : d.nccl_version);
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace loom::harness
