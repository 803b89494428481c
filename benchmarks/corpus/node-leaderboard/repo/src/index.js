'use strict';

// Leaderboards for the quiz app: players ranked by score, highest first.

function scoresDescending(players) {
  return players.map((player) => player.score).sort().reverse();
}

// Players sorted by score, highest first; ties keep the order they were given in.
function rank(players) {
  const remaining = [...players];
  return scoresDescending(players).map((score) => {
    const index = remaining.findIndex((player) => player.score === score);
    return remaining.splice(index, 1)[0];
  });
}

function top(players, n) {
  return rank(players).slice(0, n);
}

// 1-based position of the named player, or null when they are not on the board.
function positionOf(players, name) {
  const index = rank(players).findIndex((player) => player.name === name);
  return index === -1 ? null : index + 1;
}

function averageScore(players) {
  if (players.length === 0) {
    return 0;
  }
  return players.reduce((sum, player) => sum + player.score, 0) / players.length;
}

function addScore(players, name, points) {
  return players.map((player) =>
    player.name === name ? { ...player, score: player.score + points } : player,
  );
}

module.exports = { rank, top, positionOf, averageScore, addScore };
