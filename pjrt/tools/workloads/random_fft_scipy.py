"""jax.random distributions, jnp.fft, jax.scipy.special and
jax.scipy.stats workloads. Both platforms use the same keys, so samples
compare value by value."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pjrt.tools.workloads.registry import workload


def _keyed(sample_fn):
  """(init, step) drawing sample_fn(key) with a fresh key every step."""
  sample = jax.jit(sample_fn)

  def init(seed):
    return jax.random.key(seed)

  def step(key):
    key, sub = jax.random.split(key)
    return key, sample(sub)

  return init, step


@workload("random")
def random_continuous():
  """Samples of every continuous jax.random distribution (normal, uniform,
  truncated_normal, multivariate_normal, gamma, beta, dirichlet,
  exponential, laplace, logistic, t, cauchy, gumbel, pareto, weibull_min,
  lognormal, chisquare, rayleigh) and their means."""
  n = 4096

  def sample(key):
    r = jax.random
    ks = iter(r.split(key, 20))
    cov = jnp.array([[1.0, 0.5, 0.1], [0.5, 2.0, 0.3], [0.1, 0.3, 1.5]])
    out = {
        "normal": r.normal(next(ks), (n,)),
        "uniform": r.uniform(next(ks), (n,), minval=-2.0, maxval=3.0),
        "truncated_normal": r.truncated_normal(next(ks), -1.0, 2.0, (n,)),
        "multivariate_normal": r.multivariate_normal(
            next(ks), jnp.array([1.0, -1.0, 0.0]), cov, (n // 4,)),
        "gamma": r.gamma(next(ks), 2.5, (n,)),
        "beta": r.beta(next(ks), 2.0, 5.0, (n,)),
        "dirichlet": r.dirichlet(next(ks), jnp.array([1.0, 2.0, 3.0]),
                                 (n // 4,)),
        "exponential": r.exponential(next(ks), (n,)),
        "laplace": r.laplace(next(ks), (n,)),
        "logistic": r.logistic(next(ks), (n,)),
        "t": r.t(next(ks), 5.0, (n,)),
        "cauchy": r.cauchy(next(ks), (n,)),
        "gumbel": r.gumbel(next(ks), (n,)),
        "pareto": r.pareto(next(ks), 3.0, (n,)),
        "weibull_min": r.weibull_min(next(ks), 1.0, 1.5, (n,)),
        "lognormal": r.lognormal(next(ks), 0.5, (n,)),
        "chisquare": r.chisquare(next(ks), 4.0, (n,)),
        "rayleigh": r.rayleigh(next(ks), 2.0, (n,)),
    }
    out["means"] = {k: jnp.mean(v) for k, v in out.items()
                    if k != "cauchy"}
    return out

  return _keyed(sample)


@workload("random")
def random_discrete():
  """Samples of the discrete jax.random functions (bernoulli, categorical,
  poisson, binomial, geometric, randint, bits, permutation, choice with and
  without replacement, shuffle via permutation of an array, rademacher)."""
  n = 4096

  def sample(key):
    r = jax.random
    ks = iter(r.split(key, 16))
    logits = jnp.log(jnp.array([0.1, 0.2, 0.3, 0.4]))
    return {
        "bernoulli": r.bernoulli(next(ks), 0.3, (n,)),
        "categorical": r.categorical(next(ks), logits, shape=(n,)),
        "poisson": r.poisson(next(ks), 3.5, (n,)),
        "poisson_large": r.poisson(next(ks), 40.0, (n // 4,)),
        "binomial": r.binomial(next(ks), 20, 0.3, (n // 4,)),
        "geometric": r.geometric(next(ks), 0.25, (n,)),
        "randint": r.randint(next(ks), (n,), -50, 50),
        "bits": r.bits(next(ks), (n,)),
        "permutation": r.permutation(next(ks), 1000),
        "permute_rows": r.permutation(
            next(ks), jnp.arange(64.0).reshape(16, 4), axis=0),
        "choice_replace": r.choice(next(ks), 100, (256,)),
        "choice_no_replace": r.choice(next(ks), 100, (50,), replace=False),
        "choice_weighted": r.choice(next(ks), 10, (256,),
                                    p=jnp.arange(1.0, 11.0) / 55.0),
        "rademacher": r.rademacher(next(ks), (n,)),
    }

  return _keyed(sample)


@workload("random")
def random_sampling_pipeline():
  """A Monte Carlo estimate built from several distributions: dropout masks
  (bernoulli), data shuffling (permutation) and a mixture of Gaussians
  sampled with categorical + normal, then moments."""

  def sample(key):
    r = jax.random
    k1, k2, k3, k4 = r.split(key, 4)
    x = jnp.arange(512.0 * 16).reshape(512, 16) / 1000.0
    x = x[r.permutation(k1, 512)]
    x = x * r.bernoulli(k2, 0.9, x.shape) / 0.9
    comp = r.categorical(k3, jnp.log(jnp.array([0.5, 0.3, 0.2])), shape=(8192,))
    mus, sds = jnp.array([-2.0, 0.0, 3.0]), jnp.array([0.5, 1.0, 0.7])
    mix = mus[comp] + sds[comp] * r.normal(k4, (8192,))
    return {"x_colmean": x.mean(0), "mix_moments": jnp.stack(
        [mix.mean(), mix.var(), jnp.mean(mix ** 3)]), "components": comp}

  return _keyed(sample)


@workload("fft")
def fft_transforms():
  """jnp.fft: fft, ifft, rfft, irfft, fft2, ifft2, fftn, rfft2, fftshift and
  fftfreq on complex64 / float32 signals (a spectral filter)."""

  @jax.jit
  def transforms(x, img):
    spec = jnp.fft.fft(x)
    low = jnp.where(jnp.abs(jnp.fft.fftfreq(x.shape[-1])) < 0.1, spec, 0)
    r = jnp.fft.rfft(x.real)
    spec2 = jnp.fft.fft2(img)
    return {
        "fft": spec,
        "ifft_lowpass": jnp.fft.ifft(low),
        "rfft": r,
        "irfft": jnp.fft.irfft(r, n=x.shape[-1]),
        "fft2": spec2,
        "ifft2": jnp.fft.ifft2(spec2).real,
        "fftn": jnp.fft.fftn(img[None].repeat(4, 0)),
        "rfft2": jnp.fft.rfft2(img.real),
        "power_shifted": jnp.fft.fftshift(jnp.abs(spec2) ** 2),
    }

  def init(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    x = (jax.random.normal(k1, (16, 256)) +
         1j * jax.random.normal(k2, (16, 256))).astype(jnp.complex64)
    img = jax.random.normal(k3, (64, 64)).astype(jnp.complex64)
    return x, img

  def step(state):
    return state, transforms(*state)

  return init, step


@workload("scipy", dtype="f64")
def scipy_special_functions():
  """jax.scipy.special: gammaln, digamma, erf, erfc, erfinv, logsumexp,
  betainc, gammainc, gammaincc, xlogy, xlog1py, expit, logit, ndtri,
  log_ndtr, i0e, i1e, zeta, polygamma, entr, betaln on 1024 points."""
  from jax.scipy import special as sp  # pylint: disable=g-import-not-at-top

  @jax.jit
  def evaluate(x, u):
    return {
        "gammaln": sp.gammaln(x), "digamma": sp.digamma(x),
        "erf": sp.erf(x - 2.5), "erfc": sp.erfc(x - 2.5),
        "erfinv": sp.erfinv(2 * u - 1), "ndtri": sp.ndtri(u),
        "log_ndtr": sp.log_ndtr(x - 3.0),
        "logsumexp": sp.logsumexp(x.reshape(32, 32), axis=1),
        "betainc": sp.betainc(2.0, 3.0, u), "gammainc": sp.gammainc(x, 2.0),
        "gammaincc": sp.gammaincc(x, 2.0), "xlogy": sp.xlogy(u, x),
        "xlog1py": sp.xlog1py(u, x), "expit": sp.expit(x - 2.5),
        "logit": sp.logit(u), "i0e": sp.i0e(x), "i1e": sp.i1e(x),
        "zeta": sp.zeta(x + 1.5, 1.0), "polygamma": sp.polygamma(1, x),
        "entr": sp.entr(u), "betaln": sp.betaln(x, 2.0),
    }

  def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    x = jax.random.uniform(k1, (1024,), jnp.float64, 0.1, 5.0)
    u = jax.random.uniform(k2, (1024,), jnp.float64, 1e-3, 1 - 1e-3)
    return x, u

  def step(state):
    return state, evaluate(*state)

  return init, step


@workload("scipy", dtype="f64")
def scipy_stats_distributions():
  """jax.scipy.stats: norm, t, gamma, beta, logistic, cauchy, poisson,
  multivariate_normal logpdf / cdf / ppf, as in a likelihood evaluation."""
  from jax.scipy import stats  # pylint: disable=g-import-not-at-top

  @jax.jit
  def evaluate(x, u, k):
    pos = jnp.abs(x) + 0.1
    return {
        "norm_logpdf": stats.norm.logpdf(x, 0.5, 1.5),
        "norm_cdf": stats.norm.cdf(x), "norm_ppf": stats.norm.ppf(u),
        "t_logpdf": stats.t.logpdf(x, 4.0),
        "logistic_cdf": stats.logistic.cdf(x), "cauchy_cdf": stats.cauchy.cdf(x),
        "gamma_logpdf": stats.gamma.logpdf(pos, 2.0, scale=1.5),
        "gamma_cdf": stats.gamma.cdf(pos, 2.0),
        "beta_logpdf": stats.beta.logpdf(u, 2.0, 3.0),
        "poisson_logpmf": stats.poisson.logpmf(k, 3.0),
        "mvn_logpdf": stats.multivariate_normal.logpdf(
            x.reshape(-1, 4), jnp.zeros(4),
            jnp.eye(4) + 0.3 * jnp.ones((4, 4))),
        "total_loglik": jnp.sum(stats.norm.logpdf(x, 0.5, 1.5)),
    }

  def init(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(k1, (1024,), jnp.float64),
            jax.random.uniform(k2, (1024,), jnp.float64, 1e-3, 1 - 1e-3),
            jax.random.randint(k3, (1024,), 0, 12))

  def step(state):
    return state, evaluate(*state)

  return init, step
