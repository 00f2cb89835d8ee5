/** Started console logins in a Map (take-once, expiring, bounded); see LoginStateStore. */
import type { LoginStateRecord, LoginStateStore } from "../contracts.js";
import { MemoryTakeOnceStore } from "./take-once.js";

export class MemoryLoginStateStore extends MemoryTakeOnceStore<LoginStateRecord> implements LoginStateStore {}
