/**
 * The store layer's surface: the contracts (contracts.ts), openStore() and
 * the default file path. Backends are reached through openStore() only.
 */
export type * from "./contracts.js";
export { openStore, type StoreConfig, type OpenStoreOptions } from "./open.js";
export { defaultStorePath } from "./default-path.js";
