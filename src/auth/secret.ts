/** Comparing secrets in constant time (of their hashes, so their lengths do not leak either). */
import { createHash, timingSafeEqual } from "node:crypto";

export function secretEquals(given: string, secret: string): boolean {
  return timingSafeEqual(createHash("sha256").update(given).digest(), createHash("sha256").update(secret).digest());
}
