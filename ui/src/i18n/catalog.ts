// Loads every Chinese dictionary (each strings.zh.ts registers its translations when imported): main.tsx
// imports this module once, before the app renders.
import.meta.glob("../**/*.zh.ts", { eager: true });
