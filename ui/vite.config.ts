import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// The API server serves dist/ at / (engine/api/static.py); `npm run dev` proxies the API to PORPOISE_URL.
export default defineConfig({
  plugins: [react()],
  // relative asset URLs + <base href> in index.html: the app does not assume it owns the origin
  base: "./",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1500,
    rollupOptions: {
      output: {
        manualChunks: {
          react: ["react", "react-dom", "react-router"],
          graph: ["@xyflow/react"],
        },
      },
    },
  },
  worker: { format: "es" },
  server: {
    proxy: {
      "/api": { target: process.env.PORPOISE_URL ?? "http://127.0.0.1:12345", changeOrigin: true },
    },
  },
  test: {
    environment: "happy-dom",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
