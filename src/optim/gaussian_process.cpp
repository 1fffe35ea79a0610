// Gaussian-process regression: see gaussian_process.hpp.
#include "optim/gaussian_process.hpp"

#include "core/error.hpp"

#include <cmath>
#include <limits>
#include <numbers>

namespace selfspec {

namespace {

// ℓ grid relative to √D: a change of one bit in D ≈ 40–160 dimensions moves k by a few percent at
// the middle of the grid; the ends let the likelihood pick a much rougher or smoother surface.
constexpr double kDefaultScales[] = {0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0};

}  // namespace

double normal_pdf(double z) {
  return std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
}

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::numbers::sqrt2);
}

double GaussianProcess::kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const {
  const double d2 = (a - b).squaredNorm();
  return std::exp(-d2 / (2.0 * length_scale_ * length_scale_));
}

double GaussianProcess::factorise(double length_scale) {
  length_scale_ = length_scale;
  Eigen::MatrixXd k(n_, n_);
  for (Eigen::Index i = 0; i < n_; ++i) {
    for (Eigen::Index j = 0; j <= i; ++j) {
      const double v = kernel(inputs_.row(i).transpose(), inputs_.row(j).transpose());
      k(i, j) = v;
      k(j, i) = v;
    }
    k(i, i) += noise_;
  }
  llt_.compute(k);
  if (llt_.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  alpha_ = llt_.solve(y_);
  const Eigen::MatrixXd l = llt_.matrixL();
  const double log_det = 2.0 * l.diagonal().array().log().sum();
  return -0.5 * y_.dot(alpha_) - 0.5 * log_det -
         0.5 * static_cast<double>(n_) * std::log(2.0 * std::numbers::pi);
}

void GaussianProcess::fit(const Eigen::MatrixXd& inputs, std::span<const double> targets,
                          std::span<const double> length_scales) {
  SELFSPEC_CHECK(inputs.rows() > 0, "GaussianProcess::fit: no observations");
  SELFSPEC_CHECK(static_cast<std::size_t>(inputs.rows()) == targets.size(),
                 "GaussianProcess::fit: {} inputs but {} targets", inputs.rows(), targets.size());
  n_ = inputs.rows();
  inputs_ = inputs;
  y_.resize(n_);
  double sum = 0.0;
  for (Eigen::Index i = 0; i < n_; ++i) {
    const double t = targets[static_cast<std::size_t>(i)];
    SELFSPEC_CHECK(std::isfinite(t), "GaussianProcess::fit: target {} is {}", i, t);
    y_(i) = t;
    sum += t;
  }
  y_mean_ = sum / static_cast<double>(n_);
  const double var = (y_.array() - y_mean_).square().sum() / static_cast<double>(n_);
  y_scale_ = var > 1e-24 ? std::sqrt(var) : 1.0;
  y_ = (y_.array() - y_mean_) / y_scale_;

  std::vector<double> grid(length_scales.begin(), length_scales.end());
  if (grid.empty()) {
    const double root_d = std::sqrt(static_cast<double>(std::max<Eigen::Index>(1, inputs.cols())));
    for (double s : kDefaultScales) grid.push_back(s * root_d);
  }
  double best_scale = grid.front();
  double best = -std::numeric_limits<double>::infinity();
  for (double scale : grid) {
    SELFSPEC_CHECK(scale > 0.0, "GaussianProcess::fit: length scale {} must be positive", scale);
    const double ll = factorise(scale);
    if (ll > best) {
      best = ll;
      best_scale = scale;
    }
  }
  SELFSPEC_CHECK(std::isfinite(best),
                 "GaussianProcess::fit: the kernel matrix is not positive "
                 "definite for any length scale");
  log_likelihood_ = factorise(best_scale);
}

GpPrediction GaussianProcess::predict(const Eigen::VectorXd& x) const {
  SELFSPEC_CHECK(fitted(), "GaussianProcess::predict before fit");
  Eigen::VectorXd k(n_);
  for (Eigen::Index i = 0; i < n_; ++i) k(i) = kernel(inputs_.row(i).transpose(), x);
  const double mean = k.dot(alpha_);
  const Eigen::VectorXd v = llt_.matrixL().solve(k);
  const double var = std::max(0.0, 1.0 + noise_ - v.squaredNorm());
  return {y_mean_ + y_scale_ * mean, y_scale_ * std::sqrt(var)};
}

}  // namespace selfspec
