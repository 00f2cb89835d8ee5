/**
 * The decision pipeline of each tool call (docs/adr/0022-decision-pipeline.md):
 * visibility → ordered rules → Cedar (for the `policy` action), under a profile
 * (enforce or dry-run). Every call decision is appended to the store's
 * decision records, logged, and counted. A bad policy at start fails the
 * start; a bad policy on reload keeps the one in force.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Principal } from "../auth/principal.js";
import type { Clock, IdGenerator } from "../clock.js";
import type { GovernanceSettings, NamedProfile } from "../config/governance.js";
import { ErrorCodes, GatewayError, toToolErrorText } from "../errors.js";
import { sessionHash, type Logger } from "../logging.js";
import type { DecisionOutcome, DecisionRecord, Store } from "../store/contracts.js";
import { CedarPolicy } from "./cedar.js";
import { canonical, firstRule, isVisible, itemVisibleUnder, profileFor } from "./match.js";
import { Pins } from "./pins.js";

export interface GovernanceDeps {
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  store: () => Store;
}

/** One tool call as the faces see it. */
export interface GovernedCall {
  principal?: Principal | undefined;
  /** "meta", "server", "all" or "virtual". */
  face: string;
  /** The virtual server (/v/<name>/mcp) the call came through: its own visibility and rules apply when it has them (docs/adr/0024). */
  virtualServer?: string | undefined;
  sessionId?: string | undefined;
  server: string;
  tool: string;
  args?: Record<string, unknown> | undefined;
  /** The caller makes an `approve` decision an approval (docs/adr/0025): authorize() returns it instead of refusing. */
  waitsForApproval?: boolean | undefined;
}

interface InForce {
  settings: GovernanceSettings;
  cedar?: CedarPolicy | undefined;
  version: string;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

export class Governance {
  private current: InForce | undefined;
  /** Decisions by outcome since start (the metric). */
  readonly counts = new Map<DecisionOutcome, number>();
  /** Told each decision's outcome (the composition root counts it in /metrics). */
  onDecided?: (outcome: DecisionOutcome) => void;
  /** Told each record once it is in the store (the audit trail's export: OpenTelemetry log records, audit-sink.ts). */
  onRecorded?: (record: DecisionRecord) => void;
  /** Pinned tool definitions (docs/adr/0029), as governance.pins.mode says. */
  readonly pins: Pins;

  constructor(
    private readonly settings: GovernanceSettings,
    private readonly deps: GovernanceDeps,
  ) {
    this.pins = new Pins({ ...deps, mode: () => (this.current?.settings ?? settings).pins.mode });
  }

  /** Reads and checks the policy files (loading Cedar only if one is set); throws EMCP_CONFIG_INVALID naming the file and line. */
  async start(): Promise<void> {
    this.current ??= await load(this.settings);
    this.deps.logger.info({ policyVersion: this.current.version, profile: this.settings.profile }, "governance_started");
  }

  /** Applies new settings; a bad policy keeps the one in force and says why. */
  async reload(next: GovernanceSettings): Promise<{ applied: true; policyVersion: string } | { applied: false; reason: string }> {
    try {
      this.current = await load(next);
      this.deps.logger.info({ policyVersion: this.current.version, profile: next.profile }, "governance_reloaded");
      return { applied: true, policyVersion: this.current.version };
    } catch (err) {
      const reason = `${toToolErrorText(err)} The policy in force (${this.current?.version ?? "none"}) is kept.`;
      this.deps.logger.error({ err: reason }, "governance_reload_failed");
      return { applied: false, reason };
    }
  }

  /** The governance block in force: the last one that loaded (a reload with a bad policy keeps the previous), before start() the configured one. */
  get settingsInForce(): GovernanceSettings {
    return this.current?.settings ?? this.settings;
  }

  get policyVersion(): string | undefined {
    return this.current?.version;
  }

  /** The named profile the principal gets: the first governance.profileFor entry that matches it; undefined: the gateway's own settings. */
  profileOf(principal: Principal | undefined): NamedProfile | undefined {
    return profileFor(this.inForce().settings, principal);
  }

  /** Whether the caller sees the tool at all (hidden tools are absent from lists and unknown by name). */
  visible(principal: Principal | undefined, server: string, tool: string, virtualServer?: string): boolean {
    const s = this.inForce().settings;
    const v = virtualServer === undefined ? undefined : s.virtualServers.find((x) => x.name === virtualServer);
    const p = this.profileOf(principal);
    return isVisible(v?.visibility ?? p?.visibility ?? s.visibility, v?.visibleByDefault ?? p?.visibleByDefault ?? s.visibleByDefault, {
      principal,
      server,
      tool,
    });
  }

  /** Whether the caller sees a resource (by URI; a template by its uriTemplate) or a prompt (by name): hidden ones are absent and unknown (visibility.ts). */
  itemVisible(principal: Principal | undefined, server: string, kind: "resource" | "prompt", name: string): boolean {
    return itemVisibleUnder(this.inForce().settings, { principal, server, kind, name });
  }

  /**
   * Decides a call and records the decision; throws when the call may not go
   * on (enforce): EMCP_UNKNOWN_TOOL for a hidden tool, EMCP_POLICY_DENIED,
   * EMCP_APPROVAL_REQUIRED. In dry-run it only records what would have happened.
   */
  async authorize(call: GovernedCall): Promise<DecisionRecord> {
    return this.decide(call, true);
  }

  /**
   * Post-approval revalidation (docs/adr/0025): decides the call again under the policy in force now,
   * recording nothing; throws EMCP_POLICY_DENIED when it would now be refused. An `approve` passes
   * (the approval being acted on is that).
   */
  async recheck(call: GovernedCall): Promise<void> {
    await this.decide({ ...call, waitsForApproval: true }, false);
  }

  /** Appends an approval event (approval_approved / _rejected / _expired / _cancelled) to the decision records, logged and counted. */
  async note(record: DecisionRecord): Promise<void> {
    await this.record(record, this.inForce().settings);
  }

  private async decide(call: GovernedCall, recorded: boolean): Promise<DecisionRecord> {
    const inForce = this.inForce();
    const { settings } = inForce;
    if (!this.visible(call.principal, call.server, call.tool, call.virtualServer)) {
      // Hidden means unknown: the same error as a tool that does not exist, and no record (nothing was decided about a tool the caller cannot see).
      throw new GatewayError(ErrorCodes.UNKNOWN_TOOL, `server '${call.server}' has no tool '${call.tool}'. Call list_tools to see the tools you can use.`, {
        details: { server: call.server, tool: call.tool },
      });
    }
    // Pinned definitions (docs/adr/0029): a quarantined tool is unknown (hide) or needs a person's approval (approve).
    const quarantine = await this.pins.quarantined(call.server, call.tool);
    if (quarantine !== undefined && this.pins.mode === "hide")
      throw new GatewayError(ErrorCodes.UNKNOWN_TOOL, `server '${call.server}' has no tool '${call.tool}'. Call list_tools to see the tools you can use.`, {
        details: { server: call.server, tool: call.tool },
      });
    // A virtual server's own rules replace the gateway's on its face (docs/adr/0024); a named profile's replace the gateway's for its principals.
    const own = call.virtualServer === undefined ? undefined : settings.virtualServers.find((v) => v.name === call.virtualServer);
    const named = this.profileOf(call.principal);
    const matched = firstRule(own?.rules ?? named?.rules ?? settings.rules, call);
    const action = matched?.rule.action ?? own?.defaultAction ?? named?.defaultAction ?? settings.defaultAction;
    let verdict: "allow" | "deny" | "approve" | "error" = action === "policy" ? "deny" : action;
    let decidedBy: DecisionRecord["decidedBy"] = matched ? "rule" : "default";
    let policyIds: string[] | undefined;
    let error: string | undefined;
    if (action === "policy") {
      decidedBy = "cedar";
      const answer = inForce.cedar!.evaluate({
        principal: call.principal,
        action: "call_tool",
        server: call.server,
        tool: call.tool,
        args: call.args,
        face: call.face,
        sessionHash: call.sessionId === undefined ? undefined : sessionHash(call.sessionId),
        now: this.deps.clock.now(),
      });
      policyIds = answer.policyIds;
      error = answer.error;
      verdict = answer.error !== undefined ? "error" : answer.decision;
    }
    // A changed definition never goes through silently: what would be allowed needs an approval, naming the pin.
    const pinned = quarantine !== undefined && verdict === "allow" ? quarantine : undefined;
    if (pinned !== undefined) verdict = "approve";
    const ruleId = pinned ?? matched?.id;
    const dry = (named?.mode ?? settings.profile) === "dry-run";
    const profile = dry ? "dry-run" : "enforce";
    const outcome: DecisionOutcome =
      verdict === "allow" ? "allow" : verdict === "approve" ? (dry ? "would_require_approval" : "approval_required") : dry ? "would_deny" : verdict;
    const args = call.args ?? {};
    const record: DecisionRecord = {
      id: this.deps.newId(),
      at: this.deps.clock.now(),
      outcome,
      profile,
      ...(named ? { profileName: named.name } : {}),
      decidedBy,
      ...(call.principal ? { principalHash: call.principal.hash } : {}),
      face: call.face,
      ...(call.sessionId !== undefined ? { sessionHash: sessionHash(call.sessionId) } : {}),
      server: call.server,
      tool: call.tool,
      argumentsDigest: sha256(JSON.stringify(canonical(args))),
      ...(settings.audit.storeArguments ? { arguments: args } : {}),
      ...(ruleId !== undefined ? { ruleId } : {}),
      ...(policyIds ? { policyIds } : {}),
      policyVersion: inForce.version,
      ...(error !== undefined ? { error } : {}),
    };
    if (recorded) await this.record(record, settings);
    if (outcome === "deny" || outcome === "error") {
      const by =
        policyIds !== undefined
          ? `Cedar policies ${policyIds.length ? policyIds.join(", ") : "(none permitted it)"}`
          : `rule ${matched?.id ?? "defaultAction"}`;
      throw new GatewayError(
        ErrorCodes.POLICY_DENIED,
        `the gateway's policy does not allow calling '${call.tool}' on server '${call.server}' (${by}${error !== undefined ? `; the policy could not be evaluated, so the call is refused: ${error}` : ""}). Ask the operator if you need it.`,
        {
          details: {
            server: call.server,
            tool: call.tool,
            ...(matched ? { rule: matched.id } : {}),
            ...(policyIds ? { policies: policyIds } : {}),
            policyVersion: inForce.version,
          },
        },
      );
    }
    if (pinned !== undefined && outcome === "approval_required" && !call.waitsForApproval) {
      throw new GatewayError(
        ErrorCodes.APPROVAL_REQUIRED,
        `the definition of '${call.tool}' on server '${call.server}' changed since it was pinned (${pinned}), so each call needs a person's approval, and this way of calling cannot wait for one. An admin can accept the new definition on the console's Pins page.`,
        { details: { server: call.server, tool: call.tool, pin: pinned, policyVersion: inForce.version } },
      );
    }
    if (outcome === "approval_required" && !call.waitsForApproval) {
      throw new GatewayError(
        ErrorCodes.APPROVAL_REQUIRED,
        `calling '${call.tool}' on server '${call.server}' needs a person's approval (rule ${matched?.id ?? "defaultAction"}), and this way of calling cannot wait for one, so the call is refused. Call it with execute_tool or tools/call, where it waits for the approval.`,
        { details: { server: call.server, tool: call.tool, rule: matched?.id ?? "defaultAction", policyVersion: inForce.version } },
      );
    }
    return record;
  }

  private inForce(): InForce {
    if (!this.current) throw new GatewayError(ErrorCodes.CLOSED, "governance has not started yet (the gateway is starting)");
    return this.current;
  }

  private async record(record: DecisionRecord, settings: GovernanceSettings): Promise<void> {
    this.counts.set(record.outcome, (this.counts.get(record.outcome) ?? 0) + 1);
    this.onDecided?.(record.outcome);
    const { id: decisionId, ...fields } = record;
    const level = record.outcome === "allow" ? "info" : "warn";
    this.deps.logger[level]({ decisionId, ...fields, arguments: undefined }, "governance_decision");
    // Fails the call when the record cannot be written: a decision that is not in the audit trail did not happen.
    await this.deps.store().decisions.append(record, { maxAgeMs: settings.audit.maxAgeMs, maxRecords: settings.audit.maxRecords });
    this.onRecorded?.(record);
  }
}

/** Reads the Cedar files and computes the policy version: a hash of the rules, visibility, profile and policy text. */
async function load(settings: GovernanceSettings): Promise<InForce> {
  let cedar: CedarPolicy | undefined;
  let policyText = "";
  if (settings.cedar) {
    const read = async (file: string) => {
      try {
        return await readFile(file, "utf8");
      } catch (err) {
        throw new GatewayError(ErrorCodes.CONFIG_INVALID, `cannot read Cedar file ${file} (gateway.governance.cedar): ${toToolErrorText(err)}`, {
          details: { file },
        });
      }
    };
    policyText = await read(settings.cedar.policyFile);
    const schemaText = settings.cedar.schemaFile !== undefined ? await read(settings.cedar.schemaFile) : undefined;
    cedar = await CedarPolicy.load(
      { file: settings.cedar.policyFile, text: policyText },
      settings.cedar.schemaFile !== undefined && schemaText !== undefined ? { file: settings.cedar.schemaFile, text: schemaText } : undefined,
    );
  }
  const version = sha256(
    JSON.stringify(
      canonical({
        rules: settings.rules,
        visibility: settings.visibility,
        visibleByDefault: settings.visibleByDefault,
        defaultAction: settings.defaultAction,
        profiles: settings.profiles,
        profileFor: settings.profileFor,
        // Curation and virtual servers change what reaches the upstream: a new version when they change.
        curation: settings.curation,
        virtualServers: settings.virtualServers,
        policyText,
      }),
    ),
  ).slice(0, 16);
  return { settings, cedar, version };
}
