// A small seeded generator (mulberry32) with the draws the environments and sampling need.

export class Random {
  constructor(seed = Date.now()) {
    this.state = seed >>> 0;
  }

  // Uniform in [0, 1).
  next() {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  // Standard normal (Box-Muller).
  normal() {
    const u = 1 - this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  integer(below) {
    return Math.floor(this.next() * below);
  }

  // `count` distinct integers of [0, below), in random order.
  choose(below, count) {
    const pool = Array.from({ length: below }, (_, i) => i);
    for (let i = 0; i < count; i++) {
      const j = i + this.integer(below - i);
      [pool[i], pool[j]] = [pool[j], pool[i]];
    }
    return pool.slice(0, count);
  }
}
