// Gaussian-process regression (Rasmussen & Williams 2006, Alg. 2.1): the surrogate model of the
// Bayesian optimisation that searches skip sets (Draft & Verify §3.3; SWIFT §4.1 "Gaussian
// update"). Inputs are points in R^D (skip masks as 0/1 vectors); the kernel is the squared
// exponential k(x, x') = s² exp(−|x − x'|² / (2 ℓ²)), which on 0/1 vectors is a function of the
// Hamming distance. Targets are standardised (mean 0, variance 1) before fitting, so s² = 1; the
// length scale ℓ is chosen from a fixed grid by the log marginal likelihood (deterministic: no
// random restarts). The noise variance is small and fixed: the search's objective is a
// deterministic function of the mask (measured cost table, teacher-forced acceptance).
//
// Eigen does the linear algebra (Cholesky LLT); written here because no packaged C++ GP library
// is in Debian, and the surrogate needs only these ~100 lines.
#pragma once

#include <Eigen/Dense>

#include <span>
#include <vector>

namespace selfspec {

struct GpPrediction {
  double mean = 0.0;  // in the targets' units
  double stddev = 0.0;
};

class GaussianProcess {
 public:
  // `noise` is the observation noise variance in standardised units.
  explicit GaussianProcess(double noise = 1e-6) : noise_(noise) {}

  // Fits to rows of `inputs` ([n × D]) and their `targets` (n values). Chooses ℓ from
  // `length_scales` (every value > 0; empty: a default grid scaled by √D) by the log marginal
  // likelihood. Throws selfspec::Error for n = 0, mismatched sizes or non-finite targets.
  void fit(const Eigen::MatrixXd& inputs, std::span<const double> targets,
           std::span<const double> length_scales = {});

  GpPrediction predict(const Eigen::VectorXd& x) const;
  double length_scale() const { return length_scale_; }
  double log_marginal_likelihood() const { return log_likelihood_; }
  bool fitted() const { return n_ > 0; }

 private:
  double kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const;
  // Factorises K + σ²I for length scale ℓ; returns the log marginal likelihood.
  double factorise(double length_scale);

  double noise_;
  Eigen::Index n_ = 0;
  Eigen::MatrixXd inputs_;
  Eigen::VectorXd y_;  // standardised targets
  double y_mean_ = 0.0;
  double y_scale_ = 1.0;
  double length_scale_ = 1.0;
  double log_likelihood_ = 0.0;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::VectorXd alpha_;  // (K + σ²I)⁻¹ y
};

// Standard normal density and distribution function (for expected improvement).
double normal_pdf(double z);
double normal_cdf(double z);

}  // namespace selfspec
