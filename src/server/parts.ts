/**
 * The gateway's parts in the order they start, and one close() that walks
 * them backwards (as Fastify's onClose hooks run): each part's close is
 * awaited in turn, a failure is logged (`part_close_failed`) and the rest are
 * still closed. close() runs once; later calls return the same promise.
 */
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";

export interface Part {
  /** For logs and tests: `part_closed` names it. */
  readonly name: string;
  close(): void | Promise<void>;
}

export class Parts {
  readonly #parts: Part[] = [];
  #closing: Promise<void> | undefined;

  constructor(private readonly logger: Logger) {}

  /** Adds a part that started (or will start) after every part added before it; it is closed before them. */
  add(name: string, close: () => void | Promise<void>): void {
    if (this.#closing) throw new GatewayError(ErrorCodes.CLOSED, `part '${name}' was added after close(): add every part before the gateway closes`);
    this.#parts.push({ name, close });
  }

  /** The parts' names in the order close() closes them. */
  get closeOrder(): string[] {
    return this.#parts.map((p) => p.name).reverse();
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const part of [...this.#parts].reverse()) {
        try {
          await part.close();
          this.logger.debug({ part: part.name }, "part_closed");
        } catch (err) {
          this.logger.error({ part: part.name, err: errorMessage(err) }, "part_close_failed");
        }
      }
    })();
    return this.#closing;
  }
}
