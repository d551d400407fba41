"""Plain-JAX scientific workloads: ODE integration, n-body, Monte Carlo,
and automatic differentiation (vmap / jacfwd / jacrev / hessian)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pjrt.tools.workloads.registry import workload


def _lorenz(y, sigma=10.0, rho=28.0, beta=8.0 / 3.0):
  x, yy, z = y[..., 0], y[..., 1], y[..., 2]
  return jnp.stack([sigma * (yy - x), x * (rho - z) - yy, x * yy - beta * z],
                   -1)


def _rk4(f, y, h):
  k1 = f(y)
  k2 = f(y + 0.5 * h * k1)
  k3 = f(y + 0.5 * h * k2)
  k4 = f(y + h * k3)
  return y + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


@workload("scientific", dtype="f64")
def ode_rk4_fori_loop():
  """RK4 on a batch of 64 Lorenz systems, 500 fixed steps in a fori_loop."""

  @jax.jit
  def integrate(y0):
    return jax.lax.fori_loop(0, 500, lambda i, y: _rk4(_lorenz, y, 1e-3), y0)

  def init(seed):
    return 1.0 + 0.1 * jax.random.normal(jax.random.key(seed), (64, 3),
                                         jnp.float64)

  def step(y0):
    y = integrate(y0)
    return y0, {"y": y}

  return init, step


@workload("scientific", dtype="f64")
def ode_rk45_adaptive_while_loop():
  """Adaptive-step RK4 (step doubling) on a damped pendulum in a
  while_loop, integrating to t=10 with an error-controlled step size."""

  def f(y):
    return jnp.stack([y[1], -0.1 * y[1] - jnp.sin(y[0])])

  @jax.jit
  def integrate(y0):
    t_end, tol = 10.0, 1e-8

    def cond(c):
      return c[0] < t_end

    def body(c):
      t, y, h, n = c
      h = jnp.minimum(h, t_end - t)
      full = _rk4(f, y, h)
      half = _rk4(f, _rk4(f, y, h / 2), h / 2)
      err = jnp.max(jnp.abs(full - half))
      accept = err <= tol
      t = jnp.where(accept, t + h, t)
      y = jnp.where(accept, half, y)
      factor = jnp.clip(0.9 * (tol / jnp.maximum(err, 1e-300)) ** 0.2, 0.2,
                        5.0)
      return t, y, h * factor, n + 1

    t, y, h, n = jax.lax.while_loop(
        cond, body, (jnp.float64(0.0), y0, jnp.float64(0.01), 0))
    return y, n

  def init(seed):
    return jnp.array([2.0, 0.0]) + 0.1 * jax.random.normal(
        jax.random.key(seed), (2,), jnp.float64)

  def step(y0):
    y, n = integrate(y0)
    return y0, {"y": y, "steps": n}

  return init, step


@workload("scientific", dtype="f64")
def nbody_leapfrog():
  """Gravitational n-body (64 bodies, softened), 50 leapfrog steps in a
  fori_loop; energy before and after."""
  n = 64

  def accel(pos, mass):
    d = pos[None, :, :] - pos[:, None, :]
    r2 = jnp.sum(d * d, -1) + 1e-2
    inv = mass[None, :] * r2 ** -1.5
    return jnp.sum(d * inv[..., None], axis=1)

  def energy(pos, vel, mass):
    d = pos[None, :, :] - pos[:, None, :]
    r = jnp.sqrt(jnp.sum(d * d, -1) + 1e-2)
    pot = -0.5 * jnp.sum(jnp.triu(mass[:, None] * mass[None, :] / r, 1)) * 2
    return 0.5 * jnp.sum(mass * jnp.sum(vel * vel, -1)) + pot

  @jax.jit
  def simulate(pos, vel, mass):
    dt = 1e-3

    def body(i, pv):
      pos, vel = pv
      vel = vel + 0.5 * dt * accel(pos, mass)
      pos = pos + dt * vel
      vel = vel + 0.5 * dt * accel(pos, mass)
      return pos, vel
    e0 = energy(pos, vel, mass)
    pos, vel = jax.lax.fori_loop(0, 50, body, (pos, vel))
    return pos, vel, e0, energy(pos, vel, mass)

  def init(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(k1, (n, 3), jnp.float64),
            0.1 * jax.random.normal(k2, (n, 3), jnp.float64),
            jax.random.uniform(k3, (n,), jnp.float64, 0.5, 1.5))

  def step(state):
    pos, vel, mass = state
    pos, vel, e0, e1 = simulate(pos, vel, mass)
    return (pos, vel, mass), {"pos": pos, "vel": vel, "energy": (e0, e1)}

  return init, step


@workload("scientific")
def monte_carlo_option_pricing():
  """Monte Carlo: 16k geometric Brownian motion paths (32 steps) pricing a
  European and an Asian call, with a fresh key per step."""
  paths, steps_t = 16384, 32

  @jax.jit
  def price(key):
    s0, k, r, sigma, t = 100.0, 105.0, 0.03, 0.2, 1.0
    dt = t / steps_t
    z = jax.random.normal(key, (paths, steps_t))
    log_s = jnp.log(s0) + jnp.cumsum(
        (r - 0.5 * sigma ** 2) * dt + sigma * jnp.sqrt(dt) * z, axis=1)
    s = jnp.exp(log_s)
    disc = jnp.exp(-r * t)
    european = disc * jnp.maximum(s[:, -1] - k, 0.0)
    asian = disc * jnp.maximum(jnp.mean(s, axis=1) - k, 0.0)
    return (jnp.mean(european), jnp.std(european) / jnp.sqrt(paths),
            jnp.mean(asian))

  def init(seed):
    return jax.random.key(seed)

  def step(key):
    key, sub = jax.random.split(key)
    eu, se, asian = price(sub)
    return key, {"european": eu, "stderr": se, "asian": asian}

  return init, step


@workload("scientific", dtype="f64")
def autodiff_jacobians_hessian():
  """vmap over 32 points of jacfwd, jacrev and hessian of a small nonlinear
  map R^6 -> R^4 and a scalar energy, plus grad through vmap."""

  def fmap(x):
    a = jnp.arange(24.0).reshape(4, 6) / 24.0
    return jnp.tanh(a @ x) * jnp.sin(x[:4]) + jnp.exp(-x[2:] ** 2)

  def energy(x):
    return jnp.sum(jnp.cos(x) * x ** 2) + jnp.prod(1 + 0.1 * x) + jnp.logaddexp(
        x[0], x[-1])

  @jax.jit
  def derivs(xs):
    jf = jax.vmap(jax.jacfwd(fmap))(xs)
    jr = jax.vmap(jax.jacrev(fmap))(xs)
    h = jax.vmap(jax.hessian(energy))(xs)
    g = jax.grad(lambda xs: jnp.sum(jax.vmap(energy)(xs)))(xs)
    return jf, jr, h, g

  def init(seed):
    return jax.random.normal(jax.random.key(seed), (32, 6), jnp.float64)

  def step(xs):
    jf, jr, h, g = derivs(xs)
    return xs, {"jacfwd": jf, "jacrev": jr, "hessian": h, "grad": g}

  return init, step
