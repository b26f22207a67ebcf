// The start dialog (DolphinScheduler's and Airflow's trigger form): the workflow's global parameters as
// rows pre-filled with its values, failure strategy, worker group, notification and alert group, priority,
// dry run and the tasks to start from with their scope; POST /workflows/{code}/start, then follow the new
// instance.
import { useId, useState, type FormEvent } from "react";
import { useNavigate } from "react-router";

import { useAlertGroups, useWorkerGroups } from "../../api/admin";
import { ApiError, type WorkflowDetail } from "../../api/client";
import { useStartWorkflow } from "../../api/workflows";
import { ErrorBox } from "../../components/ErrorBox";
import { Modal } from "../../components/Modal";
import { initialForm, rowOfField, startBody, type StartForm } from "./startForm";
import { tStart, type FailureStrategy, type Priority, type Scope, type WarningType } from "./strings";

type DocParams = Parameters<typeof initialForm>[0];

export function StartDialog({ workflow, onClose }: { workflow: WorkflowDetail; onClose: () => void }) {
  const navigate = useNavigate();
  const id = useId();
  const [form, setForm] = useState<StartForm>(() => initialForm(workflow.document.params as DocParams));
  const [rowErrors, setRowErrors] = useState<Map<number, string>>(new Map());
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const starting = useStartWorkflow(workflow.code);
  const workerGroups = useWorkerGroups().data?.items ?? [];
  const alertGroups = useAlertGroups().data?.items ?? [];
  const tasks = workflow.document.tasks.map((t) => t.name);
  const groupNames = workerGroups.some((g) => g.name === "default")
    ? workerGroups
    : [{ name: "default", live: undefined }, ...workerGroups];

  const update = (change: Partial<StartForm>) => setForm((f) => ({ ...f, ...change }));
  const setRow = (index: number, change: { prop?: string; value?: string }) => {
    setForm((f) => ({ ...f, rows: f.rows.map((r, i) => (i === index ? { ...r, ...change } : r)) }));
    // an error stays only on a row not changed since
    setRowErrors((errors) => {
      if (!errors.has(index)) return errors;
      const next = new Map(errors);
      next.delete(index);
      return next;
    });
    setError((e: unknown) => (e instanceof ApiError && rowOfField(form.rows, e.field) === index ? null : e));
  };

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    const built = startBody(form);
    if ("errors" in built) {
      setRowErrors(built.errors);
      return;
    }
    setRowErrors(new Map());
    setBusy(true);
    try {
      const outcome = await starting.mutateAsync(built.body);
      if ("refused" in outcome) throw new Error(outcome.refused ?? tStart.commandRefused);
      if ("queued" in outcome) throw new Error(tStart.queued(outcome.queued));
      navigate(`/instances/${outcome.instance}`);
    } catch (exc) {
      const row = exc instanceof ApiError ? rowOfField(form.rows, exc.field) : -1;
      if (row >= 0) setRowErrors(new Map([[row, (exc as ApiError).message]]));
      else setError(exc);
    } finally {
      setBusy(false);
    }
  };

  const rowError = (i: number) => rowErrors.get(i);
  return (
    <Modal labelledBy={`${id}-title`} onClose={onClose} testId="start-dialog">
      <form className="dialog-form" onSubmit={submit} aria-labelledby={`${id}-title`} noValidate>
        <h2 id={`${id}-title`}>
          {tStart.title} {workflow.name}
        </h2>
        <fieldset>
          <legend>{tStart.params}</legend>
          {form.rows.length === 0 && <p className="muted">{tStart.noParams}</p>}
          {form.rows.length > 0 && (
            <table className="grid params" data-testid="start-params">
              <thead>
                <tr>
                  <th>{tStart.prop}</th>
                  <th>{tStart.value}</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {form.rows.map((row, i) => {
                  const message = rowError(i);
                  const errorId = `${id}-row-${i}-error`;
                  const invalid = {
                    "aria-invalid": message !== undefined,
                    "aria-describedby": message ? errorId : undefined,
                  };
                  return (
                    <tr key={i} data-testid={`start-param-${i}`}>
                      <td>
                        {row.declared !== undefined ? (
                          <code>{row.prop}</code>
                        ) : (
                          <input
                            aria-label={tStart.nameOfRow(i + 1)}
                            list={`${id}-declared`}
                            value={row.prop}
                            onChange={(e) => setRow(i, { prop: e.target.value })}
                            {...invalid}
                          />
                        )}
                      </td>
                      <td>
                        <input
                          aria-label={
                            row.declared !== undefined ? tStart.valueOf(row.prop) : tStart.valueOfRow(i + 1)
                          }
                          value={row.value}
                          onChange={(e) => setRow(i, { value: e.target.value })}
                          {...invalid}
                        />
                        {message && (
                          <div className="error-inline" id={errorId} role="alert">
                            {message}
                          </div>
                        )}
                      </td>
                      <td>
                        {row.declared === undefined && (
                          <button
                            type="button"
                            className="link"
                            aria-label={tStart.removeParam(i + 1)}
                            onClick={() => {
                              update({ rows: form.rows.filter((_, j) => j !== i) });
                              setRowErrors(new Map());
                            }}
                          >
                            {tStart.remove}
                          </button>
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )}
          <datalist id={`${id}-declared`}>
            {form.rows
              .filter((r) => r.declared !== undefined)
              .map((r) => (
                <option key={r.prop} value={r.prop} />
              ))}
          </datalist>
          <button type="button" onClick={() => update({ rows: [...form.rows, { prop: "", value: "" }] })}>
            {tStart.addParam}
          </button>
          {form.rows.length > 0 && <p className="muted small">{tStart.paramsHelp}</p>}
        </fieldset>
        <fieldset className="options">
          <legend>{tStart.options}</legend>
          <label>
            {tStart.failureStrategy}
            <select
              value={form.failureStrategy}
              onChange={(e) => update({ failureStrategy: e.target.value as FailureStrategy })}
            >
              {Object.entries(tStart.failureStrategies).map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </label>
          <label>
            {tStart.workerGroup}
            <select value={form.workerGroup} onChange={(e) => update({ workerGroup: e.target.value })}>
              {groupNames.map((g) => (
                <option key={g.name} value={g.name}>
                  {g.name}
                  {g.live !== undefined && g.live.length === 0 ? ` (${tStart.noLiveWorker})` : ""}
                </option>
              ))}
            </select>
          </label>
          <label>
            {tStart.warningType}
            <select
              value={form.warningType}
              onChange={(e) => update({ warningType: e.target.value as WarningType })}
            >
              {Object.entries(tStart.warningTypes).map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </label>
          <label>
            {tStart.alertGroup}
            <select value={form.alertGroup} onChange={(e) => update({ alertGroup: e.target.value })}>
              <option value="">{tStart.noAlertGroup}</option>
              {alertGroups.map((g) => (
                <option key={g.id} value={String(g.id)}>
                  {g.name}
                </option>
              ))}
            </select>
          </label>
          <label>
            {tStart.priority}
            <select value={form.priority} onChange={(e) => update({ priority: e.target.value as Priority })}>
              {Object.entries(tStart.priorities).map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </label>
          <label className="inline">
            <input
              type="checkbox"
              checked={form.dryRun}
              onChange={(e) => update({ dryRun: e.target.checked })}
            />{" "}
            {tStart.dryRun}
          </label>
        </fieldset>
        <fieldset>
          <legend>{tStart.startTasks}</legend>
          <div className="start-tasks" data-testid="start-tasks">
            {tasks.map((name) => (
              <label key={name} className="inline">
                <input
                  type="checkbox"
                  aria-label={tStart.startTask(name)}
                  checked={form.startTasks.includes(name)}
                  onChange={(e) =>
                    update({
                      startTasks: e.target.checked
                        ? tasks.filter((t) => t === name || form.startTasks.includes(t))
                        : form.startTasks.filter((t) => t !== name),
                    })
                  }
                />{" "}
                {name}
              </label>
            ))}
          </div>
          <label>
            {tStart.scope}
            <select
              value={form.scope}
              disabled={form.startTasks.length === 0}
              onChange={(e) => update({ scope: e.target.value as Scope })}
            >
              {Object.entries(tStart.scopes).map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </label>
          {form.startTasks.length === 0 && <p className="muted small">{tStart.startTasksHelp}</p>}
        </fieldset>
        {rowErrors.size > 0 && (
          <p className="error-inline" role="status">
            {tStart.fixFields}
          </p>
        )}
        <ErrorBox error={error} title={tStart.refused} />
        <div className="actions">
          <button type="submit" disabled={busy}>
            {busy ? tStart.starting : tStart.start}
          </button>
          <button type="button" onClick={onClose}>
            {tStart.cancel}
          </button>
        </div>
      </form>
    </Modal>
  );
}
