// The agent's reply while the model writes it (issue 24): `streamed-text` artifact chunks
// that the stream carries and GetTask never lists.

export interface ArtifactUpdate {
  artifact?: { artifactId?: string; name?: string; parts?: Array<{ text?: string }> };
  append?: boolean;
  lastChunk?: boolean;
}

export function isStreamedText(update: ArtifactUpdate): boolean {
  const artifact = update.artifact;
  return (
    !!artifact &&
    artifact.name === "streamed-text" &&
    typeof artifact.artifactId === "string" &&
    artifact.artifactId.startsWith("stream:")
  );
}

/** The texts being typed, by artifact id, in the order they started. */
export class StreamedText {
  private texts = new Map<string, string>();

  /** Applies one chunk; false when the update is not streamed text. */
  apply(update: ArtifactUpdate): boolean {
    if (!isStreamedText(update)) return false;
    const id = update.artifact!.artifactId!;
    const text = (update.artifact!.parts ?? []).map((p) => p.text ?? "").join("");
    const before = update.append ? (this.texts.get(id) ?? "") : "";
    this.texts.set(id, before + text);
    return true;
  }

  /** The final status message replaces what was typed. */
  clear(): void {
    this.texts.clear();
  }

  current(): string[] {
    return [...this.texts.values()].filter((t) => t.length > 0);
  }
}
