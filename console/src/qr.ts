import { encode } from 'uqr';

const SVG = 'http://www.w3.org/2000/svg';

/**
 * A QR code of a link as an SVG element (uqr encodes; the drawing is ours, so no markup string is parsed): dark
 * modules on white with the quiet zone the standard asks for, so phone cameras read it from the screen.
 */
export const qrCode = (text: string, label: string): SVGSVGElement => {
    const { data, size } = encode(text, { ecc: 'M', border: 4 });
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', `0 0 ${size} ${size}`);
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', label);
    svg.setAttribute('class', 'qr');
    svg.setAttribute('shape-rendering', 'crispEdges');
    const background = document.createElementNS(SVG, 'rect');
    background.setAttribute('width', String(size));
    background.setAttribute('height', String(size));
    background.setAttribute('fill', '#fff');
    svg.appendChild(background);
    let d = '';
    data.forEach((row, y) => row.forEach((dark, x) => {
        if (dark) {
            d += `M${x} ${y}h1v1h-1z`;
        }
    }));
    const path = document.createElementNS(SVG, 'path');
    path.setAttribute('d', d);
    path.setAttribute('fill', '#000');
    svg.appendChild(path);
    return svg;
};
