// Lint rules: typescript-eslint's recommended set over src/ and test/; gen/ is generated.
import tseslint from "typescript-eslint";

export default tseslint.config({ ignores: ["gen/**", "node_modules/**", ".switchboard/**"] }, ...tseslint.configs.recommended, {
  rules: {
    "@typescript-eslint/no-explicit-any": "off",
    "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
  },
});
