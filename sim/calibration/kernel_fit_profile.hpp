#pragma once
// A calibration profile's kernel measurements as the kernel fit's samples
// (topologies/kernel_fit.hpp), the fitted kernel model `simulate --calibration` runs, and the
// text `calibrate show` and `simulate` print about it (docs/calibration.md "Fitting the
// kernels").
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/document.hpp"
#include "sim/calibration/profile.hpp"
#include "topologies/kernel_fit.hpp"

namespace loom::calibration {

/// What the kernel fit takes from a profile.
struct ProfileKernelSamples {
  topo::KernelSamples samples;
  std::vector<topo::MeasuredGemm> raw;  ///< harness GEMMs, timed as measured at their shapes
  std::vector<std::string> notes;       ///< what was left out and why
};

/// The samples of `profile`: harness `gemm` rows (each with the deviation its spread implies,
/// IQR / 1.349, at least 2%), trace GEMM records of bf16, fp16 and fp8 (5%), the `elementwise`
/// memory rows (else `copy`), the `launch` figures. `origin` names the profile in errors;
/// throws ConfigError on a malformed `launch` row.
ProfileKernelSamples profile_kernel_samples(const Profile& profile, const std::string& origin);
/// Whether `profile` holds GEMM, memory or launch measurements the kernel fit uses.
bool has_kernel_samples(const Profile& profile);

/// The kernel parameters of `gpu` fitted to `profile`, from `prior`.
topo::KernelFit fit_profile_kernels(const Profile& profile, const std::string& origin,
                                    const topo::GpuSpec& gpu, const topo::GpuEfficiency& prior);

/// What a fitted kernel model holds, for the notes simulate prints.
struct KernelFitUse {
  std::vector<std::string> fitted;    ///< kernels timed with fitted parameters
  std::vector<std::string> defaults;  ///< kernels timed with the default parameters
  std::vector<std::string> measured;  ///< kernels timed by raw measurements
};

/// The fitted model of `profile` on `gpu` (harness shapes kept as measured) and what it uses.
std::shared_ptr<const topo::KernelTimeModel> fitted_kernel_model(const Profile& profile,
                                                                 const std::string& origin,
                                                                 const topo::GpuSpec& gpu,
                                                                 const topo::GpuEfficiency& prior,
                                                                 KernelFitUse& use);
/// `use` as JSON: {"fitted": [...], "defaults": [...], "measured": [...]}.
OrderedJson kernel_fit_use_json(const KernelFitUse& use);
/// `use` as one line: "kernels: fitted ...; defaults ...; measured ...".
std::string kernel_fit_use_text(const KernelFitUse& use);

/// The catalog GPU a profile was measured on: `gpu` when given (load_gpu), else the one its
/// harness `device` name (or first trace's GPU) names ("NVIDIA H200" -> h200; a bare model
/// with no catalog entry tries its SXM one); nullopt when none matches.
std::optional<topo::GpuSpec> profile_gpu(const Profile& profile, const std::string& gpu);

/// `calibrate show`'s section: each fitted parameter beside its default with bounds, status
/// and uncertainty, the launch figures, and each sample's residual under both.
std::string render_kernel_fit(const topo::KernelFit& fit, const topo::GpuSpec& gpu);

}  // namespace loom::calibration
