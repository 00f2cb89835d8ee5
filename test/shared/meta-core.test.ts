/** test/integration/meta-core.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010); see test/README.md. */
process.env.EMCEEPEE_TEST_SHARING = "shared";
await import("../integration/meta-core.test.js");
