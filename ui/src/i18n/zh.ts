// Every Chinese dictionary (each strings.zh.ts registers its translations when imported), as one chunk that
// catalog.ts loads when Chinese is first wanted.
import.meta.glob("../**/*.zh.ts", { eager: true });
