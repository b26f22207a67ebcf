// The header's display-zone switch: UTC, the browser's zone, or any IANA zone (as Airflow's), kept in
// localStorage; every time formatted through components/time.ts follows it.
import { useState } from "react";

import { tZone } from "./strings";
import { browserZone, isZone, knownZones, setDisplayZone, useDisplayZone } from "./time";

export function ZoneSwitch() {
  const zone = useDisplayZone();
  const [other, setOther] = useState(false);
  const [typed, setTyped] = useState(zone === "UTC" || zone === "local" ? "" : zone);
  const [bad, setBad] = useState<string | null>(null);
  const named = zone !== "UTC" && zone !== "local";
  const choice = other ? "other" : zone === "UTC" || zone === "local" ? zone : "chosen";
  const apply = () => {
    const name = typed.trim();
    if (!isZone(name)) {
      setBad(name);
      return;
    }
    setBad(null);
    setOther(false);
    setDisplayZone(name);
  };
  return (
    <span className="zone-switch" title={tZone.title}>
      <select
        aria-label={tZone.label}
        value={choice}
        onChange={(e) => {
          const value = e.target.value;
          setBad(null);
          if (value === "other") setOther(true);
          else if (value !== "chosen") {
            setOther(false);
            setDisplayZone(value);
          } else setOther(false);
        }}
      >
        <option value="UTC">{tZone.utc}</option>
        <option value="local">{tZone.local(browserZone())}</option>
        {named && <option value="chosen">{tZone.chosen(zone)}</option>}
        <option value="other">{tZone.other}</option>
      </select>
      {other && (
        <>
          <input
            aria-label={tZone.zoneField}
            list="zone-names"
            value={typed}
            placeholder={tZone.zonePlaceholder}
            aria-invalid={bad !== null}
            aria-describedby={bad !== null ? "zone-error" : undefined}
            onChange={(e) => setTyped(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter") apply();
              if (e.key === "Escape") setOther(false);
            }}
            onBlur={() => typed.trim() && apply()}
          />
          <datalist id="zone-names">
            {knownZones().map((z) => (
              <option key={z} value={z} />
            ))}
          </datalist>
          {bad !== null && (
            <span id="zone-error" className="field-error" role="alert">
              {tZone.notZone(bad)}
            </span>
          )}
        </>
      )}
    </span>
  );
}
