// The graph beside the answer, drawn with Cytoscape.js: cited entities filled, their neighbours outlined,
// cited relationships thick. A click (or tap) on an entity calls `onOpen(entityId)`.
"use strict";

const GraphView = (() => {
  const STYLE = [
    { selector: "node", style: {
      "label": "data(title)", "font-size": 13, "color": "#1f2933", "text-valign": "bottom", "text-margin-y": 4,
      "text-wrap": "ellipsis", "text-max-width": 120, "background-color": "#ffffff", "border-width": 2,
      "border-color": "#5b6b7b", "width": "mapData(degree, 0, 80, 16, 34)", "height": "mapData(degree, 0, 80, 16, 34)",
      "text-background-color": "#fbfcfd", "text-background-opacity": 0.85, "text-background-padding": 2,
    } },
    { selector: "node[?cited]", style: { "background-color": "#2f6fb3", "border-color": "#1d4f86",
      "font-weight": "bold" } },
    { selector: "node:selected", style: { "border-color": "#d97706", "border-width": 4 } },
    { selector: "edge", style: { "width": 1.2, "line-color": "#a9b4bf", "curve-style": "bezier",
      "target-arrow-shape": "triangle", "target-arrow-color": "#a9b4bf", "arrow-scale": 0.7 } },
    { selector: "edge[?cited]", style: { "width": 3, "line-color": "#2f6fb3", "target-arrow-color": "#2f6fb3" } },
  ];

  function create(container, onOpen) {
    let cy = null;

    function show(graph) {
      const elements = [
        ...graph.nodes.map((n) => ({ group: "nodes", data: { ...n } })),
        ...graph.edges.map((e) => ({ group: "edges", data: { ...e, id: "r" + e.id } })),
      ];
      if (cy) cy.destroy();
      cy = cytoscape({
        container, elements, style: STYLE, minZoom: 0.3, maxZoom: 3, wheelSensitivity: 0.3,
        layout: { name: "cose", animate: false, randomize: false, nodeRepulsion: 120000, idealEdgeLength: 90,
          nodeOverlap: 40, gravity: 0.25, numIter: 2000, padding: 28 },
      });
      cy.on("tap", "node", (ev) => {
        cy.nodes().unselect();
        ev.target.select();
        onOpen(ev.target.id());
      });
      container.graphView = cy; // the rendered positions, for a test that clicks a node
    }

    function select(id) {
      if (!cy) return;
      cy.nodes().unselect();
      cy.getElementById(id).select();
    }

    return { show, select };
  }

  return { create };
})();
