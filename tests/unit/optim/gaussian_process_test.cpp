// Gaussian-process regression: it interpolates noise-free observations, is uncertain far from
// them and certain at them, reverts to the mean far away, prefers the length scale the data
// supports, and refuses bad input.
#include "optim/gaussian_process.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace selfspec {
namespace {

Eigen::MatrixXd points(const std::vector<std::vector<double>>& rows) {
  Eigen::MatrixXd m(static_cast<Eigen::Index>(rows.size()),
                    static_cast<Eigen::Index>(rows[0].size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j];
  return m;
}

TEST(GaussianProcess, InterpolatesObservationsAndIsCertainThere) {
  const Eigen::MatrixXd x = points({{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {1, 1, 1}});
  const std::vector<double> y = {0.5, 1.5, 2.0, -1.0};
  GaussianProcess gp;
  gp.fit(x, y);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const GpPrediction p = gp.predict(x.row(i).transpose());
    EXPECT_NEAR(p.mean, y[static_cast<std::size_t>(i)], 1e-3);
    EXPECT_LT(p.stddev, 0.01);
  }
  const GpPrediction unseen = gp.predict((Eigen::VectorXd(3) << 0, 1, 1).finished());
  EXPECT_GT(unseen.stddev, 0.05);
}

TEST(GaussianProcess, RevertsToTheMeanFarFromTheData) {
  const Eigen::MatrixXd x = points({{0.0}, {0.1}, {0.2}});
  const std::vector<double> y = {1.0, 2.0, 3.0};
  GaussianProcess gp;
  gp.fit(x, y, std::vector<double>{0.1});
  const GpPrediction far = gp.predict((Eigen::VectorXd(1) << 50.0).finished());
  EXPECT_NEAR(far.mean, 2.0, 1e-6);                     // the targets' mean
  EXPECT_NEAR(far.stddev, std::sqrt(2.0 / 3.0), 1e-3);  // their standard deviation
}

TEST(GaussianProcess, MarginalLikelihoodPrefersASmoothScaleForASmoothFunction) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (int i = 0; i < 12; ++i) {
    rows.push_back({0.5 * i});
    y.push_back(std::sin(0.1 * 0.5 * i));  // varies on a scale of ~10
  }
  GaussianProcess gp;
  gp.fit(points(rows), y, std::vector<double>{0.05, 0.5, 5.0});
  EXPECT_DOUBLE_EQ(gp.length_scale(), 5.0);
}

TEST(GaussianProcess, RefusesBadInput) {
  GaussianProcess gp;
  EXPECT_THROW(gp.predict(Eigen::VectorXd::Zero(2)), Error);
  const Eigen::MatrixXd x = points({{0, 1}, {1, 0}});
  EXPECT_THROW(gp.fit(x, std::vector<double>{1.0}), Error);
  EXPECT_THROW(gp.fit(x, std::vector<double>{1.0, NAN}), Error);
  EXPECT_THROW(gp.fit(x, std::vector<double>{1.0, 2.0}, std::vector<double>{-1.0}), Error);
}

TEST(NormalFunctions, MatchKnownValues) {
  EXPECT_NEAR(normal_cdf(0.0), 0.5, 1e-15);
  EXPECT_NEAR(normal_cdf(1.959963984540054), 0.975, 1e-12);
  EXPECT_NEAR(normal_pdf(0.0), 0.3989422804014327, 1e-15);
}

}  // namespace
}  // namespace selfspec
