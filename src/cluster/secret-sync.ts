/**
 * A person's per-user secret replaced or removed, across replicas (issue 23,
 * docs/adr/0027 §13): the replica that handled the form publishes
 * `{ server, issuer, subject, from }` on `P cluster:secrets` (names only: the
 * value stays sealed in the store), and every other replica ends that
 * person's live connections to the server there too, so none keeps a
 * process started with the old value.
 */
import type { Redis } from "ioredis";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";

type Person = { issuer: string; subject: string };

interface SecretMessage {
  server: string;
  issuer: string;
  subject: string;
  from: string;
}

export interface SecretSyncOptions {
  /** Publishes (a command connection). */
  redis: Redis;
  /** Subscribes (the cluster's subscriber connection). */
  subscriber: Redis;
  channel: string;
  incarnation: string;
  logger: Logger;
}

export class SecretSync {
  private handler: ((server: string, person: Person) => void) | undefined;

  constructor(private readonly o: SecretSyncOptions) {}

  /** What this replica does when another says a person's secret changed (the upstream factory's renew). */
  onChanged(handler: (server: string, person: Person) => void): void {
    this.handler = handler;
  }

  /** Tells the other replicas (a failed publish is logged: their connections then keep the old value until they end). */
  announce(server: string, person: Person): void {
    const message: SecretMessage = { server, issuer: person.issuer, subject: person.subject, from: this.o.incarnation };
    this.o.redis.publish(this.o.channel, JSON.stringify(message)).catch((err: unknown) => {
      this.o.logger.error({ err: errorMessage(err), server }, "cluster_publish_failed");
    });
  }

  async start(): Promise<void> {
    this.o.subscriber.on("message", (channel: string, raw: string) => {
      if (channel !== this.o.channel) return;
      let m: SecretMessage;
      try {
        m = JSON.parse(raw) as SecretMessage;
      } catch {
        return;
      }
      if (m.from === this.o.incarnation || typeof m.server !== "string" || typeof m.issuer !== "string" || typeof m.subject !== "string") return;
      this.handler?.(m.server, { issuer: m.issuer, subject: m.subject });
      this.o.logger.info({ server: m.server, from: m.from }, "cluster_secret_changed");
    });
    await this.o.subscriber.subscribe(this.o.channel);
  }

  close(): void {
    this.handler = undefined;
  }
}
